package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/store"
)

// leafException is the exception class Leaf's server names in its error body.
const leafException = "com.sankuai.inf.leaf.server.exception.LeafServerException"

// leafErrorBody is the JSON Spring Boot 1.x writes for an unhandled
// LeafServerException, field order included.
type leafErrorBody struct {
	Timestamp int64  `json:"timestamp"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Exception string `json:"exception,omitempty"`
	Message   string `json:"message"`
	Path      string `json:"path"`
}

// leafError answers a failed Leaf-compatible request exactly as Leaf does:
// HTTP 500 and message "Result{id=<code>, status=EXCEPTION}". Codes: segment
// -1 not initialised, -2 tag unknown, -3 no segment ready, -4 (ours) this
// client's lookups of unknown tags are spent; snowflake -1 clock
// still behind, -2 interrupted, -3 clock moved back > 5 ms. The code goes to
// the metrics middleware too (recordLeafCode), which counts failed segment
// requests by it.
func (h *handler) leafError(w http.ResponseWriter, r *http.Request, code int64, err error) {
	if code == 0 {
		code = -3
	}
	if code != -2 && code != -4 {
		// Unknown tags and a spent lookup limit are the caller's doing;
		// everything else is ours.
		h.logIDFailure(r.Context(), "id request failed",
			err, slog.String("path", r.URL.Path), slog.Int64("code", code),
			slog.String("request_id", requestID(r)))
	}
	recordLeafCode(w, code)
	writeJSON(w, http.StatusInternalServerError, leafErrorBody{
		Timestamp: h.d.Now().UnixMilli(),
		Status:    http.StatusInternalServerError,
		Error:     http.StatusText(http.StatusInternalServerError),
		Exception: leafException,
		Message:   "Result{id=" + strconv.FormatInt(code, 10) + ", status=EXCEPTION}",
		Path:      r.URL.Path,
	})
}

// badRequest answers 400 in Spring's error shape, so Leaf clients parse it.
func (h *handler) badRequest(w http.ResponseWriter, r *http.Request, msg string) {
	h.springError(w, r, http.StatusBadRequest, msg)
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	msg := "no route for " + r.Method + " " + r.URL.Path
	if isV1(r) {
		h.apiError(w, r, http.StatusNotFound, "not_found", msg)
		return
	}
	h.springError(w, r, http.StatusNotFound, msg)
}

// methodNotAllowed answers 405 with the Allow header RFC 9110 §15.5.6
// requires, listing the methods the path serves. chi passes those only to its
// own 405 handler, so they are looked up again here. A method chi does not
// know (e.g. BREW) on a path that serves nothing is a 404.
func (h *handler) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	allow := h.allowed(r)
	if allow == "" {
		h.notFound(w, r)
		return
	}
	w.Header().Set("Allow", allow)
	msg := "method " + r.Method + " not allowed on " + r.URL.Path + " (allowed: " + allow + ")"
	if isV1(r) {
		h.apiError(w, r, http.StatusMethodNotAllowed, "method_not_allowed", msg)
		return
	}
	h.springError(w, r, http.StatusMethodNotAllowed, msg)
}

// allowMethods are the methods an Allow header may list, in its order.
var allowMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// allowed returns the methods of allowMethods that r's path is routed for,
// comma-separated; "" when none.
func (h *handler) allowed(r *http.Request) string {
	path := r.URL.RawPath // chi routes on the escaped path when there is one
	if path == "" {
		path = r.URL.Path
	}
	var b strings.Builder
	for _, m := range allowMethods {
		if !h.router.Match(chi.NewRouteContext(), m, path) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m)
	}
	return b.String()
}

// isV1 reports whether r is for the JSON API, whose errors have its own shape.
func isV1(r *http.Request) bool {
	return r.URL.Path == "/api/v1" || strings.HasPrefix(r.URL.Path, "/api/v1/")
}

func (h *handler) springError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, leafErrorBody{
		Timestamp: h.d.Now().UnixMilli(),
		Status:    status,
		Error:     http.StatusText(status),
		Message:   msg,
		Path:      r.URL.Path,
	})
}

// disabled answers 503 for a mode that is switched off. Leaf answers 200 with
// the ID 0 here; a made-up ID is worse than an error, so we do not.
func (h *handler) disabled(w http.ResponseWriter, r *http.Request, mode, how string) {
	w.Header().Set("Retry-After", "60")
	if isV1(r) {
		h.apiError(w, r, http.StatusServiceUnavailable, "mode_disabled", mode+" mode is disabled: "+how)
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{
		"timestamp": h.d.Now().UnixMilli(),
		"status":    http.StatusServiceUnavailable,
		"error":     mode + " mode is disabled",
		"message":   how,
		"path":      r.URL.Path,
	})
}

// writeJSON answers v as JSON with no trailing newline (Spring's Jackson
// writes none, and Leaf clients may compare bodies) and, as Jackson, without
// HTML escaping: ">= 1" stays ">= 1", not "\u003e= 1".
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if err != nil {
		http.Error(w, `{"status":500,"code":"internal","message":"cannot encode answer"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// apiError is the error shape of the JSON API (/api/v1/…): an honest status,
// a stable string code and a human message.
func (h *handler) apiError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if status >= 500 {
		h.d.Logger.LogAttrs(r.Context(), slog.LevelWarn, "api request failed",
			slog.String("path", r.URL.Path), slog.String("code", code), slog.String("err", msg),
			slog.String("request_id", requestID(r)))
	}
	writeJSON(w, status, apiErrorBody{Status: status, Code: code, Message: msg, Path: r.URL.Path})
}

// apiErrorBody is the JSON of an /api/v1 error.
type apiErrorBody struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Path    string `json:"path"`
	// LeafCode is Leaf's result code (-1, -2, -3, or our -4) for failed ID
	// requests.
	LeafCode int64 `json:"leafCode,omitempty"`
}

// idError answers a failed JSON-API ID request with an honest status: 404
// for an unknown tag, 429 miss_lookup_limited with Retry-After when this
// client's lookups of unknown tags are spent (-4), 503 with Retry-After for
// everything else that passes (no segment ready, clock behind), with Leaf's
// code alongside.
func (h *handler) idError(w http.ResponseWriter, r *http.Request, leafCode int64, notFound bool, err error) {
	status, code := http.StatusServiceUnavailable, "not_ready"
	switch {
	case notFound:
		status, code = http.StatusNotFound, "tag_not_found"
	case leafCode == -1:
		code = "not_initialized"
	case leafCode == -4:
		status, code = http.StatusTooManyRequests, "miss_lookup_limited"
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		retry := time.Second
		var cb *snowflake.ClockBackwardsError
		if errors.As(err, &cb) && cb.Behind > retry {
			retry = cb.Behind
		}
		w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
	}
	if status >= 500 {
		h.logIDFailure(r.Context(), "batch request failed", err, slog.String("path", r.URL.Path),
			slog.Int64("leaf_code", leafCode), slog.String("request_id", requestID(r)))
	}
	writeJSON(w, status, apiErrorBody{Status: status, Code: code, Message: err.Error(), Path: r.URL.Path, LeafCode: leafCode})
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

// badBodyError is an admin request body refused with 400 bad_body; its text
// says why, in the API's terms.
type badBodyError string

func (e badBodyError) Error() string { return string(e) }

// bodyError answers a refused admin request body: 413 body_too_large for
// the *http.MaxBytesError of a body over maxAdminBody, 400 bad_body with
// the error's text otherwise (a badBodyError from readBody or a handler).
func (h *handler) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		h.apiError(w, r, http.StatusRequestEntityTooLarge, "body_too_large",
			"request body over "+strconv.Itoa(maxAdminBody>>10)+" KiB")
		return
	}
	h.apiError(w, r, http.StatusBadRequest, "bad_body", err.Error())
}

// leafDecodeError answers a malformed /decodeSnowflakeId?snowflakeId= with
// Leaf's errorMsg field, but with status 400 where Leaf answers 200.
func leafDecodeError(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, map[string]string{
		"errorMsg": "snowflake Id反解析失败: snowflakeId must be a non-negative 64-bit decimal integer",
	})
}

// dbPageError answers Leaf's /db page when leaf_alloc cannot be read: 503
// and a page that points to the server log, where err goes.
func (o *ops) dbPageError(w http.ResponseWriter, err error) {
	o.h.d.Logger.Warn("db page: read leaf_alloc", "err", err)
	o.render(w, http.StatusServiceUnavailable, pageData{Title: "Leaf database unavailable",
		Columns: []string{"error"}, Rows: [][]string{{"reading leaf_alloc failed; see the server log"}}})
}
