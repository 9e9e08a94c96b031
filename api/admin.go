package api

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

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
		r.Use(h.requireToken)
		r.Get("/tags", h.adminList)
		r.Post("/tags", h.adminCreate)
		r.Put("/tags/{tag}", h.adminUpdate)
		r.Patch("/tags/{tag}", h.adminUpdate)
		r.Delete("/tags/{tag}", h.adminDelete)
		r.Post("/tags/{tag}/fence", h.adminFence)
	})
}

func (h *handler) requireToken(next http.Handler) http.Handler {
	want := []byte(h.d.AdminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="leaf-go admin"`)
			h.apiError(w, r, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tagJSON is a leaf_alloc row on the admin API. MaxID is a string because
// max_id can pass JavaScript's 2^53.
type tagJSON struct {
	BizTag      string `json:"bizTag"`
	MaxID       string `json:"maxId"`
	Step        int64  `json:"step"`
	Description string `json:"description"`
	UpdateTime  string `json:"updateTime,omitempty"`
}

func rowJSON(r store.Row) tagJSON {
	t := tagJSON{BizTag: r.BizTag, MaxID: strconv.FormatInt(r.MaxID, 10), Step: r.Step, Description: r.Description}
	if !r.UpdateTime.IsZero() {
		t.UpdateTime = r.UpdateTime.UTC().Format("2006-01-02T15:04:05Z")
	}
	return t
}

func (h *handler) adminList(w http.ResponseWriter, r *http.Request) {
	rows, err := h.d.Store.Rows(r.Context())
	if err != nil {
		h.apiError(w, r, http.StatusServiceUnavailable, "store_unavailable", err.Error())
		return
	}
	out := make([]tagJSON, 0, len(rows))
	for _, row := range rows {
		out = append(out, rowJSON(row))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tags": out})
}

// adminCreate is POST /api/v1/admin/tags {"bizTag","maxId","step","description"}.
func (h *handler) adminCreate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		BizTag      string      `json:"bizTag"`
		MaxID       json.Number `json:"maxId"`
		Step        int64       `json:"step"`
		Description string      `json:"description"`
	}
	if !h.decodeBody(w, r, &in) {
		return
	}
	row := store.Row{BizTag: in.BizTag, MaxID: 1, Step: in.Step, Description: in.Description}
	if in.MaxID != "" {
		n, err := in.MaxID.Int64()
		if err != nil || n < 1 {
			h.apiError(w, r, http.StatusBadRequest, "bad_max_id", "maxId must be an integer >= 1")
			return
		}
		row.MaxID = n
	}
	if err := h.d.Store.Create(r.Context(), row); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.audit(r, "create", row.BizTag, slog.Int64("max_id", row.MaxID), slog.Int64("step", row.Step))
	if h.d.Segment != nil {
		// Re-read the tag list, so that the new tag is served at once even
		// when a request just before found it missing (the generator
		// remembers a miss for 2 s). A failure leaves that to the refresh
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
		h.apiError(w, r, http.StatusBadRequest, "bad_body", `give "step", "description" or both`)
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
	if err := h.d.Store.Delete(r.Context(), tag); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.audit(r, "delete", tag)
	w.WriteHeader(http.StatusNoContent)
}

// adminFence is POST /api/v1/admin/tags/{tag}/fence {"min":"N"}: raise max_id
// to at least N (SPEC §2 restore safety).
func (h *handler) adminFence(w http.ResponseWriter, r *http.Request) {
	tag, ok := h.adminTag(w, r)
	if !ok {
		return
	}
	var in struct {
		Min json.Number `json:"min"`
	}
	if !h.decodeBody(w, r, &in) {
		return
	}
	min, err := in.Min.Int64()
	if err != nil || min < 1 {
		h.apiError(w, r, http.StatusBadRequest, "bad_min", "min must be an integer >= 1 (a string is fine)")
		return
	}
	row, err := h.d.Store.Fence(r.Context(), tag, min)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.audit(r, "fence", tag, slog.Int64("min", min), slog.Int64("max_id", row.MaxID))
	writeJSON(w, http.StatusOK, rowJSON(row))
}

func (h *handler) adminTag(w http.ResponseWriter, r *http.Request) (string, bool) {
	tag, err := PathKey(r, "tag")
	if err != nil {
		h.apiError(w, r, http.StatusBadRequest, "bad_tag", err.Error())
		return "", false
	}
	return tag, true
}

func (h *handler) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			msg = "wrong JSON type"
			if typeErr.Field != "" {
				msg += " for field " + strconv.Quote(typeErr.Field)
			}
			msg += ": want a JSON object with the documented fields"
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.apiError(w, r, http.StatusRequestEntityTooLarge, "body_too_large", "request body over 64 KiB")
			return false
		}
		h.apiError(w, r, http.StatusBadRequest, "bad_body", "request body: "+msg)
		return false
	}
	return true
}

// storeError maps store errors of admin calls to statuses.
func (h *handler) storeError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrTagNotFound):
		h.apiError(w, r, http.StatusNotFound, "tag_not_found", err.Error())
	case errors.Is(err, store.ErrTagExists):
		h.apiError(w, r, http.StatusConflict, "tag_exists", err.Error())
	case errors.Is(err, store.ErrBadStep), errors.Is(err, store.ErrBadRow), errors.Is(err, store.ErrOverflow):
		h.apiError(w, r, http.StatusBadRequest, "bad_row", err.Error())
	default:
		h.apiError(w, r, http.StatusServiceUnavailable, "store_unavailable", err.Error())
	}
}

func (h *handler) audit(r *http.Request, op, tag string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("op", op), slog.String("biz_tag", tag), slog.String("remote", r.RemoteAddr),
		slog.String("request_id", requestID(r))}, attrs...)
	h.d.Logger.LogAttrs(r.Context(), slog.LevelInfo, "admin audit", attrs...)
}
