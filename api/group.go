package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/leaf-go/leaf/bizno"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
)

// groupRoutes mounts the routes of date-grouped tags (docs/contract.md
// §10): formatted IDs, parse, and the admin routes of declarations.
func (h *handler) groupRoutes(r chi.Router) {
	r.Get("/api/v1/segment/{tag}/formatted", h.groupFormatted)
	r.Get("/api/v1/segment/{tag}/parse/{formatted}", h.groupParse)
	r.Get("/api/v1/groups", h.groupState) // group_state.go
	h.groupAdminRoutes(r)
}

// groupFormatted is GET /api/v1/segment/{tag}/formatted?count=N →
// {"ids":["ORD20261201000123",…]}: N IDs of one period (one clock reading).
func (h *handler) groupFormatted(w http.ResponseWriter, r *http.Request) {
	tag, n, ok := h.batchArgs(w, r)
	if !ok {
		return
	}
	if h.d.Groups == nil {
		h.disabled(w, r, "segment", segmentHow)
		return
	}
	ids, err := h.d.Groups.Next(r.Context(), tag, n, make([]string, 0, n))
	if err != nil {
		h.idError(w, r, segment.Code(err), err)
		return
	}
	writeJSON(w, http.StatusOK, batchAnswer{IDs: ids})
}

// parseAnswer is the JSON of the parse route.
type parseAnswer struct {
	BizTag string `json:"bizTag"`
	// Period is the period key (yyyyMMdd, yyyyMM or yyyy); Row its
	// leaf_alloc row.
	Period string `json:"period"`
	Row    string `json:"row"`
	// Sequence is a string, as IDs are (it may pass 2^53).
	Sequence string `json:"sequence"`
	// PeriodStart is the period's first instant in the tag's zone, RFC 3339.
	PeriodStart string `json:"periodStart"`
}

// groupParse is GET /api/v1/segment/{tag}/parse/{formatted}: the period and
// sequence of an ID of the tag's template. A string the template cannot
// have made is 400 bad_id.
func (h *handler) groupParse(w http.ResponseWriter, r *http.Request) {
	tag, err := PathKey(r, "tag")
	if err != nil {
		h.apiError(w, r, http.StatusBadRequest, "bad_tag", err.Error())
		return
	}
	if h.d.Groups == nil {
		h.disabled(w, r, "segment", segmentHow)
		return
	}
	d, err := h.d.Groups.Find(r.Context(), tag)
	if err != nil {
		h.idError(w, r, segment.Code(err), err)
		return
	}
	tpl, _ := h.d.Groups.Template(tag)
	p, err := tpl.Parse(chi.URLParam(r, "formatted"))
	if err != nil {
		h.apiError(w, r, http.StatusBadRequest, "bad_id", err.Error())
		return
	}
	grp, _ := bizno.ParseGroup(d.Grp)
	loc, _ := h.d.Groups.Location(tag)
	start := p.Start(loc)
	key := grp.Key(start)
	writeJSON(w, http.StatusOK, parseAnswer{BizTag: tag, Period: key, Row: group.RowTag(tag, key),
		Sequence: strconv.FormatInt(p.Seq, 10), PeriodStart: start.Format("2006-01-02T15:04:05Z07:00")})
}

// groupLeafGet serves Leaf's /api/segment/get/{key} for a grouped tag and
// refuses a period row; it returns false when key is neither (a plain tag).
// A grouped tag answers its formatted ID when the template is all digits and
// fits int64, otherwise 400 telling to use the formatted route: the bare
// sequence restarts every period and is never answered.
func (h *handler) groupLeafGet(w http.ResponseWriter, r *http.Request, key string) bool {
	gs := h.d.Groups
	switch {
	case gs == nil:
		return false
	case gs.IsPeriodRow(key):
		h.badRequest(w, r, "biz_tag "+strconv.Quote(key)+" is a period row of a grouped tag; its bare sequence repeats every period: ask for the grouped tag")
		return true
	case !gs.Has(key):
		return false
	}
	id, err := gs.NextInt(r.Context(), key)
	switch {
	case errors.Is(err, group.ErrNotNumeric):
		h.badRequest(w, r, "biz_tag "+strconv.Quote(key)+" is grouped and its IDs are not numbers that fit int64: use GET /api/v1/segment/"+key+"/formatted")
	case err != nil:
		h.leafError(w, r, segment.Code(err), err)
	default:
		h.writeID(w, r, id)
	}
	return true
}

// groupDeclaredElsewhere reports, for a key the plain routes found no
// leaf_alloc row of, whether leaf_group declares it (read now, as
// [group.Groups.Find] does: a tag declared by leafctl or another server
// is served on its first request, not after the next re-read).
func (h *handler) groupDeclaredElsewhere(r *http.Request, key string) bool {
	if h.d.Groups == nil {
		return false
	}
	_, err := h.d.Groups.Find(r.Context(), key)
	return err == nil
}

// groupBatchGuard refuses the plain batch route for a grouped tag or a
// period row (answered 400 use_formatted); it returns true when it answered.
func (h *handler) groupBatchGuard(w http.ResponseWriter, r *http.Request, tag string) bool {
	gs := h.d.Groups
	if gs == nil || !gs.Has(tag) && !gs.IsPeriodRow(tag) {
		return false
	}
	h.apiError(w, r, http.StatusBadRequest, "use_formatted",
		"biz_tag "+strconv.Quote(tag)+" is grouped (or a period row of one): use GET /api/v1/segment/{tag}/formatted")
	return true
}
