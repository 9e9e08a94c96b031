package api

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
)

// groupAdminRoutes mounts /api/v1/admin/groups… inside adminRoutes (same
// token) when grouped tags are served.
func (h *handler) groupAdminRoutes(r chi.Router) {
	if h.d.Groups == nil {
		return
	}
	r.Get("/groups", h.groupList)
	r.Post("/groups", h.groupDeclare)
	r.Put("/groups/{tag}", h.groupUpdate)
	r.Patch("/groups/{tag}", h.groupUpdate)
	r.Get("/groups/{tag}/periods", h.groupPeriods)
	r.Post("/groups/{tag}/prune", h.groupPrune)
}

// groupJSON is a leaf_group row on the admin API.
type groupJSON struct {
	BizTag       string `json:"bizTag"`
	Group        string `json:"group"`
	TimeZone     string `json:"timeZone"`
	Format       string `json:"format"`
	Step         int64  `json:"step"`
	Retention    int64  `json:"retention"`
	PrunedBefore string `json:"prunedBefore,omitempty"`
	Description  string `json:"description"`
}

func groupOut(g store.Group) groupJSON {
	return groupJSON{BizTag: g.BizTag, Group: g.Grp, TimeZone: g.TimeZone, Format: g.Format, Step: g.Step,
		Retention: g.Retention, PrunedBefore: g.PrunedBefore, Description: g.Description}
}

// groupList is GET /api/v1/admin/groups: leaf_group re-read, so that a
// database that does not answer is an error (503), not the declarations
// this server happened to hold.
func (h *handler) groupList(w http.ResponseWriter, r *http.Request) {
	if err := h.d.Groups.Reload(r.Context()); err != nil {
		h.storeError(w, r, err)
		return
	}
	out := []groupJSON{}
	for _, g := range h.d.Groups.Declarations() {
		out = append(out, groupOut(g))
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

// groupDeclare is POST /api/v1/admin/groups {"bizTag","group","timeZone",
// "format","step","retention","description"}.
func (h *handler) groupDeclare(w http.ResponseWriter, r *http.Request) {
	var in struct {
		BizTag      string `json:"bizTag"`
		Group       string `json:"group"`
		TimeZone    string `json:"timeZone"`
		Format      string `json:"format"`
		Step        *int64 `json:"step"`
		Retention   int64  `json:"retention"`
		Description string `json:"description"`
	}
	if !h.decodeBody(w, r, &in) {
		return
	}
	for _, f := range []struct{ name, v string }{{"bizTag", in.BizTag}, {"group", in.Group}, {"timeZone", in.TimeZone}, {"format", in.Format}} {
		if f.v == "" {
			h.bodyError(w, r, badBodyError("field "+f.name+" is required"))
			return
		}
	}
	if in.Step == nil {
		h.bodyError(w, r, badBodyError("field step is required"))
		return
	}
	g := store.Group{BizTag: in.BizTag, Grp: in.Group, TimeZone: in.TimeZone, Format: in.Format, Step: *in.Step,
		Retention: in.Retention, Description: in.Description}
	if err := h.d.Groups.Declare(r.Context(), g); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.audit(r, "group declare", g.BizTag, slog.String("group", g.Grp), slog.String("time_zone", g.TimeZone),
		slog.String("format", g.Format), slog.Int64("step", g.Step))
	writeJSON(w, http.StatusCreated, groupOut(g))
}

// groupUpdate is PUT/PATCH /api/v1/admin/groups/{tag}: the fields given
// (timeZone, step, retention, description) change, the others stay; a
// different group or format is refused (409 group_immutable).
func (h *handler) groupUpdate(w http.ResponseWriter, r *http.Request) {
	tag, ok := h.adminTag(w, r)
	if !ok {
		return
	}
	var in struct {
		Group       *string `json:"group"`
		TimeZone    *string `json:"timeZone"`
		Format      *string `json:"format"`
		Step        *int64  `json:"step"`
		Retention   *int64  `json:"retention"`
		Description *string `json:"description"`
	}
	if !h.decodeBody(w, r, &in) {
		return
	}
	g, err := h.d.Groups.Find(r.Context(), tag)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&g.Grp, in.Group)
	set(&g.TimeZone, in.TimeZone)
	set(&g.Format, in.Format)
	set(&g.Description, in.Description)
	if in.Step != nil {
		g.Step = *in.Step
	}
	if in.Retention != nil {
		g.Retention = *in.Retention
	}
	if err := h.d.Groups.Update(r.Context(), g); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.audit(r, "group update", tag, slog.String("time_zone", g.TimeZone), slog.Int64("step", g.Step),
		slog.Int64("retention", g.Retention))
	g, _ = h.d.Groups.Declaration(tag)
	writeJSON(w, http.StatusOK, groupOut(g))
}

// periodJSON is one period row on the admin API.
type periodJSON struct {
	Period   string `json:"period"`
	Row      string `json:"row"`
	Reserved string `json:"reserved"`
	Capacity string `json:"capacity"`
	Step     int64  `json:"step"`
}

// groupPeriods is GET /api/v1/admin/groups/{tag}/periods.
func (h *handler) groupPeriods(w http.ResponseWriter, r *http.Request) {
	tag, ok := h.adminTag(w, r)
	if !ok {
		return
	}
	ps, err := h.d.Groups.Periods(r.Context(), tag)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	out := []periodJSON{}
	for _, p := range ps {
		out = append(out, periodJSON{Period: p.Key, Row: p.Row, Reserved: strconv.FormatInt(p.Reserved, 10),
			Capacity: strconv.FormatInt(p.Capacity, 10), Step: p.Step})
	}
	writeJSON(w, http.StatusOK, map[string]any{"bizTag": tag, "periods": out})
}

// groupPrune is POST /api/v1/admin/groups/{tag}/prune {"before":"20261101"}:
// delete the periods before the key (without "before": those past the
// tag's retention).
func (h *handler) groupPrune(w http.ResponseWriter, r *http.Request) {
	tag, ok := h.adminTag(w, r)
	if !ok {
		return
	}
	var in struct {
		Before string `json:"before"`
	}
	if !h.decodeBody(w, r, &in) {
		return
	}
	if _, err := h.d.Groups.Find(r.Context(), tag); err != nil { // declared elsewhere: read it
		h.storeError(w, r, err)
		return
	}
	if in.Before == "" {
		key, err := h.d.Groups.RetentionKey(tag, h.d.Now())
		if err != nil {
			h.storeError(w, r, err)
			return
		}
		if key == "" {
			h.apiError(w, r, http.StatusBadRequest, "bad_before", "give \"before\" (a period key): the tag keeps every period (retention 0)")
			return
		}
		in.Before = key
	}
	deleted, err := h.d.Groups.Prune(r.Context(), tag, in.Before)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	if deleted == nil {
		deleted = []string{}
	}
	h.audit(r, "group prune", tag, slog.String("before", in.Before), slog.Int("rows", len(deleted)))
	writeJSON(w, http.StatusOK, map[string]any{"bizTag": tag, "before": in.Before, "deleted": deleted,
		"at": h.d.Now().UTC().Format(time.RFC3339)})
}

// refuseGroupedName refuses (409 grouped_tag_row) creating a plain tag named
// like a grouped tag or one of its period rows, and deleting a period row
// (a deleted current row would be created again from 1 by the next request
// and repeat its IDs; prune raises pruned_before first); it returns true
// when it answered.
func (h *handler) refuseGroupedName(w http.ResponseWriter, r *http.Request, tag string) bool {
	if h.d.Groups == nil {
		return false
	}
	err := group.CheckPlainTag(r.Context(), h.d.Store, tag)
	if err == nil {
		return false
	}
	h.storeError(w, r, err) // 409 grouped_tag_row (failures)
	return true
}
