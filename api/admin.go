package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/leaf-go/leaf/store"
)

// maxAdminBody bounds an admin request body, in bytes.
const maxAdminBody = 64 << 10

// adminRoutes mounts /api/v1/admin/… when an admin token is configured. The
// bearer token is compared in constant time. Every change is logged as an
// audit line (tag, operation, remote address); the token never is.
func (h *handler) adminRoutes(r chi.Router) {
	if h.d.AdminToken == "" || h.d.Store == nil {
		return // routes absent: 404 like any unknown path
	}
	r.Route("/api/v1/admin", func(r chi.Router) {
		r.Use(h.requireToken, h.withinWait)
		r.Get("/tags", h.adminList)
		r.Post("/tags", h.adminCreate)
		r.Put("/tags/{tag}", h.adminUpdate)
		r.Patch("/tags/{tag}", h.adminUpdate)
		r.Delete("/tags/{tag}", h.adminDelete)
		r.Post("/tags/{tag}/fence", h.adminFence)
		h.groupAdminRoutes(r) // group_admin.go
	})
}

// requireToken lets through requests with the admin bearer token. Every
// refusal is logged as one warn line (remote address, method, path, reason:
// missing or wrong token), never with the token presented.
func (h *handler) requireToken(next http.Handler) http.Handler {
	want := []byte(h.d.AdminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive (RFC 7235 §2.1): "bearer x" is fine.
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		got = strings.TrimLeft(got, " ")
		reason := ""
		switch {
		case !strings.EqualFold(scheme, "Bearer") || got == "":
			reason = "missing bearer token"
		case subtle.ConstantTimeCompare([]byte(got), want) != 1:
			reason = "wrong bearer token"
		}
		if reason != "" {
			h.d.Logger.LogAttrs(r.Context(), slog.LevelWarn, "admin auth failed",
				slog.String("remote", r.RemoteAddr), slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.String("reason", reason),
				slog.String("request_id", requestID(r)))
			w.Header().Set("WWW-Authenticate", `Bearer realm="leaf-go admin"`)
			h.apiError(w, r, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withinWait gives an admin request Deps.WaitTimeout in all for its
// database work (the store calls and the tag-list re-read after a create):
// no admin answer waits longer for a database that does not answer (issue
// 16 item 7).
func (h *handler) withinWait(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := h.waitCtx(r.Context())
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// waitCtx is ctx bounded by Deps.WaitTimeout: the one time bound of every
// route's calls on Deps.Store (the admin API through withinWait, Leaf's
// /db page, the store ping of /readyz and /api/v1/info), so that no route
// waits longer than --wait-timeout for a database that does not answer
// (issue 16 item 7). The segment generator's loads have their own timeout.
func (h *handler) waitCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, h.d.WaitTimeout)
}

// tagJSON is a leaf_alloc row on the admin API. MaxID is a string because
// max_id can pass JavaScript's 2^53.
type tagJSON struct {
	BizTag      string `json:"bizTag"`
	MaxID       string `json:"maxId"`
	Step        int64  `json:"step"`
	Description string `json:"description"`
	UpdateTime  string `json:"updateTime,omitempty"`
	// Ordered is true for an ordered tag (docs/contract.md §12); absent for
	// a plain one.
	Ordered bool `json:"ordered,omitempty"`
}

func rowJSON(r store.Row) tagJSON {
	t := tagJSON{BizTag: r.BizTag, MaxID: strconv.FormatInt(r.MaxID, 10), Step: r.Step, Description: r.Description, Ordered: r.Ordered}
	if !r.UpdateTime.IsZero() {
		t.UpdateTime = r.UpdateTime.UTC().Format("2006-01-02T15:04:05Z")
	}
	return t
}

func (h *handler) adminList(w http.ResponseWriter, r *http.Request) {
	rows, err := h.d.Store.Rows(r.Context())
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	out := make([]tagJSON, 0, len(rows))
	for _, row := range rows {
		out = append(out, rowJSON(row))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tags": out})
}

// adminCreate is POST /api/v1/admin/tags {"bizTag","maxId","step","description","ordered"}.
// A maxId below this server's high-water mark for the tag (markGuard) or
// below the tag's tombstone in the database (its max_id when it was deleted,
// by any server or leafctl) is 409, below_high_water or below_tombstone,
// unless "force": true with a "reason"; a forced create is logged at warn and
// in the audit line with the reason, the mark and the tombstone overridden.
func (h *handler) adminCreate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		BizTag      string      `json:"bizTag"`
		MaxID       json.Number `json:"maxId"`
		Step        *int64      `json:"step"`
		Description string      `json:"description"`
		Ordered     bool        `json:"ordered"`
		Force       bool        `json:"force"`
		Reason      string      `json:"reason"`
	}
	if !h.decodeBody(w, r, &in) {
		return
	}
	switch {
	case in.BizTag == "":
		h.bodyError(w, r, badBodyError("field bizTag is required"))
		return
	case in.Step == nil:
		h.bodyError(w, r, badBodyError("field step is required"))
		return
	case !stepInRange(*in.Step):
		h.bodyError(w, r, badBodyError("field step: want an integer in "+fieldRanges["step"]))
		return
	}
	if h.refuseGroupedName(w, r, in.BizTag) { // group_admin.go
		return
	}
	row := store.Row{BizTag: in.BizTag, MaxID: 1, Step: *in.Step, Description: in.Description, Ordered: in.Ordered}
	if in.MaxID != "" {
		n, err := in.MaxID.Int64()
		if err != nil || n < 1 || n > int64(store.MaxFence) {
			h.apiError(w, r, http.StatusBadRequest, "bad_max_id", "maxId must be an integer in "+fieldRanges["maxId"])
			return
		}
		row.MaxID = n
	}
	if !in.Force && h.d.Segment != nil && row.MaxID < h.d.Segment.HighWater(row.BizTag) {
		// A create of a tag whose row is still there is a duplicate, whatever
		// its maxId: say that before the mark, which would send the operator
		// looking for a reason to force. (With force, Create itself answers
		// tag_exists, and one store call keeps the answer within the bound.)
		if _, err := h.d.Store.MaxID(r.Context(), row.BizTag); err == nil {
			h.storeError(w, r, fmt.Errorf("create %q: %w", row.BizTag, store.ErrTagExists))
			return
		}
	}
	forced, ok := h.markGuard(w, r, row.BizTag, "maxId", row.MaxID, in.Force, in.Reason)
	if !ok {
		return
	}
	if in.Force {
		// Past the tombstone too (the tag's max_id when it was deleted, kept
		// in the database for every server): logged like the mark.
		overrode, err := h.d.Store.ForceCreate(r.Context(), row)
		if err != nil {
			h.storeError(w, r, err)
			return
		}
		if overrode > 0 {
			h.d.Logger.LogAttrs(r.Context(), slog.LevelWarn, "admin: forced below the tombstone",
				slog.String("biz_tag", row.BizTag), slog.Int64("max_id", row.MaxID), slog.Int64("tombstone", overrode),
				slog.String("reason", strings.TrimSpace(in.Reason)), slog.String("remote", r.RemoteAddr),
				slog.String("request_id", requestID(r)))
			if forced == nil {
				forced = []slog.Attr{slog.Bool("forced", true), slog.String("reason", strings.TrimSpace(in.Reason))}
			}
			forced = append(forced, slog.Int64("tombstone", overrode))
		}
	} else if err := h.d.Store.Create(r.Context(), row); err != nil {
		h.storeError(w, r, err) // below the tombstone: 409 below_tombstone
		return
	}
	h.audit(r, "create", row.BizTag, append(forced, slog.Int64("max_id", row.MaxID), slog.Int64("step", row.Step), slog.Bool("ordered", row.Ordered))...)
	if h.d.Segment != nil {
		// Re-read the tag list, so that the new tag is served at once even
		// when a request just before found it missing (the generator
		// remembers a miss for 1 s). A failure leaves that to the refresh
		// loop; the row exists either way.
		if err := h.d.Segment.Refresh(r.Context()); err != nil {
			h.d.Logger.Warn("admin create: tag list not re-read", "biz_tag", row.BizTag, "err", err)
		}
	}
	writeJSON(w, http.StatusCreated, rowJSON(row))
}

// adminUpdate is PUT/PATCH /api/v1/admin/tags/{tag} {"step","description"}:
// the fields given are changed, the others kept (as `leafctl tag update`).
func (h *handler) adminUpdate(w http.ResponseWriter, r *http.Request) {
	tag, ok := h.adminTag(w, r)
	if !ok {
		return
	}
	var in struct {
		Step        *int64  `json:"step"`
		Description *string `json:"description"`
	}
	if !h.decodeBody(w, r, &in) {
		return
	}
	if in.Step == nil && in.Description == nil {
		h.bodyError(w, r, badBodyError(`give "step", "description" or both`))
		return
	}
	if in.Step != nil && !stepInRange(*in.Step) {
		h.bodyError(w, r, badBodyError("field step: want an integer in "+fieldRanges["step"]))
		return
	}
	cur, err := h.row(r, tag)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	if in.Step != nil {
		cur.Step = *in.Step
	}
	if in.Description != nil {
		cur.Description = *in.Description
	}
	if err := h.d.Store.Update(r.Context(), tag, cur.Step, cur.Description); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.audit(r, "update", tag, slog.Int64("step", cur.Step))
	writeJSON(w, http.StatusOK, rowJSON(cur))
}

// row reads the current row of tag. Errors: store.ErrTagNotFound.
func (h *handler) row(r *http.Request, tag string) (store.Row, error) {
	rows, err := h.d.Store.Rows(r.Context())
	if err != nil {
		return store.Row{}, err
	}
	for _, row := range rows {
		if row.BizTag == tag {
			return row, nil
		}
	}
	return store.Row{}, fmt.Errorf("update %q: %w", tag, store.ErrTagNotFound)
}

func (h *handler) adminDelete(w http.ResponseWriter, r *http.Request) {
	tag, ok := h.adminTag(w, r)
	if !ok {
		return
	}
	if h.refuseGroupedName(w, r, tag) { // a period row: prune instead (group_admin.go)
		return
	}
	if err := h.d.Store.Delete(r.Context(), tag); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.audit(r, "delete", tag)
	w.WriteHeader(http.StatusNoContent)
}

// adminFence is POST /api/v1/admin/tags/{tag}/fence {"min":"N"}: raise max_id
// to at least N (docs/contract.md §2.6, restore marks).
func (h *handler) adminFence(w http.ResponseWriter, r *http.Request) {
	tag, ok := h.adminTag(w, r)
	if !ok {
		return
	}
	var in struct {
		Min    json.Number `json:"min"`
		Force  bool        `json:"force"`
		Reason string      `json:"reason"`
	}
	if !h.decodeBody(w, r, &in) {
		return
	}
	min, err := in.Min.Int64()
	if err != nil || min < 1 || min > int64(store.MaxFence) {
		h.apiError(w, r, http.StatusBadRequest, "bad_min", "min must be an integer in "+fieldRanges["min"]+" (a string is fine)")
		return
	}
	forced, ok := h.markGuard(w, r, tag, "min", min, in.Force, in.Reason)
	if !ok {
		return
	}
	row, err := h.d.Store.Fence(r.Context(), tag, min)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.audit(r, "fence", tag, append(forced, slog.Int64("min", min), slog.Int64("max_id", row.MaxID))...)
	writeJSON(w, http.StatusOK, rowJSON(row))
}

// markGuard checks a create (field maxId) or fence (field min) of tag to
// level against the high-water mark this server holds for the tag
// ([segment.Generator.HighWater]: the highest max_id it was given or read,
// kept in its data dir across restarts and across a DELETE of the row). IDs
// below the mark may have been handed out, so a row below it would hand them
// out again. Below the mark the request is refused with 409 below_high_water
// naming the mark, unless it says "force": true with a non-empty "reason";
// then ok is true and forced holds the attributes the audit line logs
// (forced, reason, high_water), and the answer is logged at warn too. force
// without a reason is 400 bad_body. Without segment mode there is no mark
// and everything passes.
func (h *handler) markGuard(w http.ResponseWriter, r *http.Request, tag, field string, level int64, force bool, reason string) (forced []slog.Attr, ok bool) {
	reason = strings.TrimSpace(reason)
	if force && reason == "" {
		h.bodyError(w, r, badBodyError(`field force needs a "reason": say why IDs below this server's high-water mark cannot be handed out twice`))
		return nil, false
	}
	if h.d.Segment == nil {
		return nil, true
	}
	mark := h.d.Segment.HighWater(tag)
	if level >= mark {
		return nil, true
	}
	if !force {
		h.apiError(w, r, http.StatusConflict, "below_high_water", fmt.Sprintf(
			"%s %d of biz_tag %q is below this server's high-water mark %d for the tag (the highest max_id it was given, "+
				"kept in its data dir): IDs up to %d may have been handed out already, and a row below the mark hands them out again. "+
				`Use %s %d or more; if you know that no ID from %d to %d was handed out, resend with "force": true and a "reason" (it is logged)`,
			field, level, tag, mark, mark-1, field, mark, level, mark-1))
		return nil, false
	}
	h.d.Logger.LogAttrs(r.Context(), slog.LevelWarn, "admin: forced below the high-water mark",
		slog.String("biz_tag", tag), slog.String("field", field), slog.Int64("value", level),
		slog.Int64("high_water", mark), slog.String("reason", reason), slog.String("remote", r.RemoteAddr),
		slog.String("request_id", requestID(r)))
	return []slog.Attr{slog.Bool("forced", true), slog.String("reason", reason), slog.Int64("high_water", mark)}, true
}

func (h *handler) adminTag(w http.ResponseWriter, r *http.Request) (string, bool) {
	tag, err := PathKey(r, "tag")
	if err != nil {
		h.apiError(w, r, http.StatusBadRequest, "bad_tag", err.Error())
		return "", false
	}
	return tag, true
}

// decodeBody reads r's body, a JSON object, into v (see readBody). A body
// readBody refuses is answered by bodyError (errors.go), in the API's terms,
// never encoding/json's: 413 body_too_large over maxAdminBody; 400 bad_body
// with readBody's reason otherwise.
func (h *handler) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := readBody(w, r, v); err != nil {
		h.bodyError(w, r, err)
		return false
	}
	return true
}

// readBody reads r's body, a JSON object, into v, a pointer to a struct
// whose fields carry json tags. Errors: the *http.MaxBytesError of a body
// over maxAdminBody; otherwise a badBodyError whose text says in the API's
// terms why the body is refused: it could not be read, is empty, is not
// JSON, has data after the object, is not an object, has an unknown field
// (`unknown field "foo"`), a field given twice (`field bizTag given twice`,
// names compared ignoring case), a field of the wrong type (`field step:
// want an integer in [1, 2147483647]`) or a string that is not valid UTF-8
// (`field bizTag: not valid UTF-8`; encoding/json would silently store
// U+FFFD instead). Field names match as encoding/json matches them,
// ignoring case.
func readBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooBig
	case err != nil:
		return badBodyError("request body could not be read")
	}
	fields, msg := bodyFields(body)
	if msg != "" {
		return badBodyError(msg)
	}
	rv := reflect.ValueOf(v).Elem()
	rt := rv.Type()
	used := make([]bool, len(fields))
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		seen := false
		for j, f := range fields {
			if !strings.EqualFold(f.name, name) {
				continue
			}
			if seen {
				return badBodyError("field " + name + " given twice")
			}
			seen, used[j] = true, true
			if !validJSONText(f.raw) {
				return badBodyError("field " + name + ": not valid UTF-8")
			}
			if err := json.Unmarshal(f.raw, rv.Field(i).Addr().Interface()); err != nil {
				return badBodyError("field " + name + ": want " + jsonKind(name, rt.Field(i).Type))
			}
		}
	}
	var unknown []string
	for j, f := range fields {
		if !used[j] {
			unknown = append(unknown, f.name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return badBodyError("unknown field " + strconv.Quote(unknown[0]))
	}
	return nil
}

// bodyField is one member of a JSON object body, in the order sent.
type bodyField struct {
	name string
	raw  json.RawMessage
}

// bodyFields splits body, one JSON object, into its members, duplicates
// kept (encoding/json keeps only the last). A non-empty msg says in the
// API's terms why body is not one JSON object.
func bodyFields(body []byte) (fields []bodyField, msg string) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, "body is empty: want a JSON object"
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var whole json.RawMessage
	if err := dec.Decode(&whole); err != nil {
		return nil, "body is not JSON"
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return nil, "trailing data after the JSON object"
	}
	if whole[0] != '{' {
		return nil, "body is JSON but not an object: want {…} with the documented fields"
	}
	// whole is one valid object, so the walk below cannot fail.
	dec = json.NewDecoder(bytes.NewReader(whole))
	if _, err := dec.Token(); err != nil { // {
		return nil, "body is not JSON"
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, "body is not JSON"
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, "body is not JSON"
		}
		fields = append(fields, bodyField{name, raw})
	}
	if !utf8.Valid(body) {
		// Not in a value (those are checked per field): in a name.
		invalidName := true
		for _, f := range fields {
			if !utf8.Valid(f.raw) {
				invalidName = false
			}
		}
		if invalidName {
			return nil, "a field name is not valid UTF-8"
		}
	}
	return fields, ""
}

// validJSONText reports whether raw, one JSON value, is valid UTF-8 and has
// no lone surrogate escape ("\udcff"): encoding/json turns both into U+FFFD
// without an error.
func validJSONText(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	if !bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return true // not a string: the type check answers
	}
	// Every U+FFFD decoded must have been sent, literally or escaped.
	sent := bytes.Count(raw, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(raw), []byte(`\ufffd`))
	return strings.Count(s, "\uFFFD") <= sent
}

// stepInRange reports whether step is a step a row may have, 1..store.MaxStep:
// an integer outside it is the same bad_body as a step that is not an integer.
func stepInRange(step int64) bool { return step >= 1 && step <= store.MaxStep }

// fieldRanges names the range of the integer fields of admin bodies, for
// bad_body messages.
var fieldRanges = map[string]string{
	"step":  fmt.Sprintf("[1, %d]", store.MaxStep),
	"maxId": fmt.Sprintf("[1, %d]", int64(store.MaxFence)),
	"min":   fmt.Sprintf("[1, %d]", int64(store.MaxFence)),
}

// jsonKind names what the field name of type t accepts, for bad_body
// messages.
func jsonKind(name string, t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	integer := "an integer"
	if rng, ok := fieldRanges[name]; ok {
		integer += " in " + rng
	}
	switch {
	case t == reflect.TypeFor[json.Number]():
		return integer + " (a JSON number or a string of digits)"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return integer
	}
	return "a " + t.Kind().String()
}

func (h *handler) audit(r *http.Request, op, tag string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("op", op), slog.String("biz_tag", tag), slog.String("remote", r.RemoteAddr),
		slog.String("request_id", requestID(r))}, attrs...)
	h.d.Logger.LogAttrs(r.Context(), slog.LevelInfo, "admin audit", attrs...)
}
