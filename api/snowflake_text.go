package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// snowflakeText is GET /api/v1/snowflake/text/{v}: a decimal ID answers its
// fixed-width text form, a text form answers its ID (snowflake.Layout.Text
// and ParseText, with the server's layout): {"id":"…","text":"…"}.
func (h *handler) snowflakeText(w http.ResponseWriter, r *http.Request) {
	raw := chi.URLParam(r, "v")
	l := h.layout()
	if id, err := strconv.ParseInt(raw, 10, 64); err == nil {
		text, err := l.Text(id)
		if err != nil {
			h.apiError(w, r, http.StatusBadRequest, "bad_id", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": raw, "text": text})
		return
	}
	id, err := l.ParseText(raw)
	if err != nil {
		h.apiError(w, r, http.StatusBadRequest, "bad_text", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": strconv.FormatInt(id, 10), "text": raw})
}
