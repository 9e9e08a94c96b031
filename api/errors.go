package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leaf-go/leaf/bizno"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
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
// HTTP 500 and message "Result{id=<code>, status=EXCEPTION}", as Spring's
// JSON error body or, for a browser's Accept header, its HTML error page.
// Codes: segment -1 not initialised, -2 tag unknown, -3 no segment ready,
// -5 (ours) too many unknown names wait for a lookup already;
// snowflake -1 clock still behind, -2 interrupted, -3 clock moved back > 5 ms.
// The code goes to the metrics middleware too (recordLeafCode), which counts
// failed segment requests by it.
func (h *handler) leafError(w http.ResponseWriter, r *http.Request, code int64, err error) {
	if code == 0 {
		code = -3
	}
	if code != -2 && code != -5 {
		// Unknown tags and a full lookup queue (a flood of unknown names)
		// are the callers' doing; everything else is ours.
		h.logIDFailure(r.Context(), "id request failed",
			err, code, slog.String("path", r.URL.Path), slog.Int64("code", code),
			slog.String("request_id", requestID(r)))
	}
	recordLeafCode(w, code)
	h.springError(w, r, http.StatusInternalServerError, leafException,
		"Result{id="+strconv.FormatInt(code, 10)+", status=EXCEPTION}")
}

// badRequest answers 400 in Spring's error shape, so Leaf clients parse it.
func (h *handler) badRequest(w http.ResponseWriter, r *http.Request, msg string) {
	h.springError(w, r, http.StatusBadRequest, "", msg)
}

// springNoMessage is the message of Spring Boot's error body when the error
// carries none, as for a path no mapping matches.
const springNoMessage = "No message available"

// notFound answers a path no route matches: Spring's 404 body ("No message
// available", the raw path) outside the JSON API, whose own error shape
// names the method and path.
func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	if isV1(r) {
		msg := "no route for " + r.Method + " " + r.URL.Path
		if h.d.AdminToken == "" && strings.HasPrefix(r.URL.Path, "/api/v1/admin/") {
			msg += " (the admin API is off: start leaf-server with --admin-token or LEAF_ADMIN_TOKEN)"
		}
		h.apiError(w, r, http.StatusNotFound, "not_found", msg)
		return
	}
	h.springError(w, r, http.StatusNotFound, "", springNoMessage)
}

// methodNotAllowed answers 405 with the Allow header RFC 9110 §15.5.6
// requires, listing the methods the path serves. chi passes those only to its
// own 405 handler, so they are looked up again here. A method chi does not
// know (e.g. BREW) on a path that serves nothing is a 404.
//
// The route's pattern goes into chi's route context when chi left it empty
// (it records none for a method it refused), so that /metrics labels the
// 405 with its route rather than "unmatched".
func (h *handler) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	allow := h.allowed(r)
	if allow == "" {
		h.notFound(w, r)
		return
	}
	if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePattern() == "" {
		first, _, _ := strings.Cut(allow, ",")
		if p := h.router.Find(chi.NewRouteContext(), first, routingPath(r)); p != "" {
			rctx.RoutePatterns = append(rctx.RoutePatterns, p)
		}
	}
	w.Header().Set("Allow", allow)
	msg := "method " + r.Method + " not allowed on " + r.URL.Path + " (allowed: " + allow + ")"
	if isV1(r) {
		h.apiError(w, r, http.StatusMethodNotAllowed, "method_not_allowed", msg)
		return
	}
	h.springError(w, r, http.StatusMethodNotAllowed, "", msg)
}

// allowMethods are the methods an Allow header may list, in its order.
var allowMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// allowed returns the methods of allowMethods that r's path is routed for,
// comma-separated; "" when none.
func (h *handler) allowed(r *http.Request) string {
	path := routingPath(r)
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

// routingPath is the path chi routes r on: the escaped one when there is one.
func routingPath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}

// isV1 reports whether r is for the JSON API, whose errors have its own shape.
func isV1(r *http.Request) bool {
	return r.URL.Path == "/api/v1" || strings.HasPrefix(r.URL.Path, "/api/v1/")
}

// springError answers status as Spring Boot 1.5's error handling does for
// Leaf: the JSON body (timestamp, status, error, exception when not "",
// message, path) by default, the HTML "Whitelabel Error Page" when the
// Accept header prefers text/html (wantsHTML). path is the request's raw
// path, as Tomcat's getRequestURI gives it (rawPath).
func (h *handler) springError(w http.ResponseWriter, r *http.Request, status int, exception, msg string) {
	now := h.d.Now()
	if wantsHTML(r.Header.Get("Accept")) {
		writeWhitelabel(w, now, status, msg)
		return
	}
	writeJSON(w, status, leafErrorBody{
		Timestamp: now.UnixMilli(),
		Status:    status,
		Error:     http.StatusText(status),
		Exception: exception,
		Message:   msg,
		Path:      rawPath(r),
	})
}

// rawPath is r's path as the client sent it, still escaped and with any
// ";name=value" path parameters (Tomcat's getRequestURI, which Spring Boot
// puts in an error body's "path"): "/api/segment/get/a%20b", not "a b". For
// a request line in absolute form, or a request made in-process without
// one, it is the escaped form of r.URL.
func rawPath(r *http.Request) string {
	if uri := r.RequestURI; strings.HasPrefix(uri, "/") {
		if i := strings.IndexByte(uri, '?'); i >= 0 {
			uri = uri[:i]
		}
		return uri
	}
	return r.URL.EscapedPath()
}

// whitelabelEscaper escapes as Spring's HtmlUtils.htmlEscape, which Spring
// Boot's error view applies to every value it prints.
var whitelabelEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

// writeWhitelabel writes Spring Boot 1.5's "Whitelabel Error Page" (its
// ErrorMvcAutoConfiguration's default error view) with the headers Leaf
// sent it with: text/html;charset=ISO-8859-1 and Content-Language: en. The
// time is Java's Date.toString in the server's time zone.
func writeWhitelabel(w http.ResponseWriter, now time.Time, status int, msg string) {
	body := "<html><body><h1>Whitelabel Error Page</h1>" +
		"<p>This application has no explicit mapping for /error, so you are seeing this as a fallback.</p>" +
		"<div id='created'>" + now.Format("Mon Jan 02 15:04:05 MST 2006") + "</div>" +
		"<div>There was an unexpected error (type=" + whitelabelEscaper.Replace(http.StatusText(status)) +
		", status=" + strconv.Itoa(status) + ").</div>" +
		"<div>" + whitelabelEscaper.Replace(msg) + "</div></body></html>"
	w.Header().Set("Content-Type", "text/html;charset=ISO-8859-1")
	w.Header().Set("Content-Language", "en")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// disabled answers 503 for a mode that is switched off, on Leaf's routes in
// Spring's error shape and key order. Leaf answers 200 with the ID 0 here; a
// made-up ID is worse than an error, so we do not.
func (h *handler) disabled(w http.ResponseWriter, r *http.Request, mode, how string) {
	w.Header().Set("Retry-After", "60")
	if isV1(r) {
		h.apiError(w, r, http.StatusServiceUnavailable, "mode_disabled", mode+" mode is disabled: "+how)
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, leafErrorBody{
		Timestamp: h.d.Now().UnixMilli(),
		Status:    http.StatusServiceUnavailable,
		Error:     mode + " mode is disabled",
		Message:   how,
		Path:      rawPath(r),
	})
}

// writeJSON answers v as JSON with no trailing newline (Spring's Jackson
// writes none, and Leaf clients may compare bodies) and, as Jackson, without
// HTML escaping: ">= 1" stays ">= 1", not "\u003e= 1". The body goes with a
// Content-Length, never chunked (docs/compatibility.md).
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
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
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
	writeJSON(w, status, apiErrorBody{Status: status, Code: code, Message: msg, Path: rawPath(r)})
}

// apiErrorBody is the JSON of an /api/v1 error.
type apiErrorBody struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Path    string `json:"path"`
	// LeafCode is Leaf's result code (-1, -2, -3, or our -4 and -5) for failed ID
	// requests.
	LeafCode int64 `json:"leafCode,omitempty"`
}

// failure is the JSON API's answer to an error: an honest status, a
// stable code and, for some, a hint appended to the error's text.
type failure struct {
	err    error // the sentinel, matched with errors.Is
	routes routeKind
	status int
	code   string
	hint   string // "" or the next step, appended to the message
}

// routeKind says which answers a failures entry is for: ID requests (a
// store error there is a failed load, 503) or admin calls, or both.
type routeKind uint8

const (
	idRoutes    routeKind = 1 << iota // batches, grouped tags' formatted and parse routes
	adminRoutes                       // /api/v1/admin/…
	allRoutes   = idRoutes | adminRoutes
)

// failures is the one map from errors to the JSON API's statuses and codes
// (ID requests: batches, grouped tags; admin calls), checked in order; the
// first entry for the route whose sentinel the error matches answers. An error none matches
// gets the caller's fallback: 503 not_ready (or not_initialized for Leaf
// code -1) for an ID request, 503 store_unavailable for an admin call. The
// snowflake entries name the failures that Leaf's codes lump together
// (issue 16 item 9): Leaf's -1 means "clock still behind" there, and a time
// outside the layout or a lost lease read as not_initialized.
var failures = []failure{
	// The clock reads before the epoch or past the layout's end: retrying
	// does not help; fix the clock or the layout (--epoch-ms, --time-bits).
	{snowflake.ErrTimeRange, idRoutes, http.StatusInternalServerError, "time_outside_layout", ""},
	// The time high-water mark could not be stored (a full disk): no ID
	// until a store succeeds; free space where the mark is kept. Leaf -4.
	{snowflake.ErrHighWater, idRoutes, http.StatusServiceUnavailable, "high_water_not_stored", ""},
	// The worker ID's lease is not renewed, was lost (leaf-server then
	// claims again by itself), or is a new claim without history still
	// waiting out any previous holder.
	{snowflake.ErrLeaseExpired, idRoutes, http.StatusServiceUnavailable, "lease_expired", ""},
	// Leaf's own -1.
	{snowflake.ErrClockBehind, idRoutes, http.StatusServiceUnavailable, "clock_behind", ""},
	// Leaf's -3 of snowflake mode: the clock went back more than Leaf
	// waits out, or reads behind the high-water mark stored before a
	// restart. The JSON code names the cause; leafCode stays -3.
	{snowflake.ErrClockBackwards, idRoutes, http.StatusServiceUnavailable, "clock_behind", ""},
	{snowflake.ErrClockBehindMark, idRoutes, http.StatusServiceUnavailable, "clock_behind", ""},

	{segment.ErrTagNotFound, idRoutes, http.StatusNotFound, "tag_not_found", ""},
	// -5: too many unknown names wait for a lookup already.
	{segment.ErrMissLimited, idRoutes, http.StatusTooManyRequests, "miss_lookup_limited", ""},
	{segment.ErrNotInitialized, idRoutes, http.StatusServiceUnavailable, "not_initialized", ""},

	// Date-grouped tags (docs/contract.md §10).
	{group.ErrNotGrouped, allRoutes, http.StatusNotFound, "not_grouped",
		": declare it with POST /api/v1/admin/groups or leafctl tag create --group"},
	// This server's clock is behind a prune.
	{group.ErrPruned, idRoutes, http.StatusConflict, "period_pruned", ""},
	// The period used its template's width.
	{bizno.ErrWidth, idRoutes, http.StatusConflict, "width_exhausted", ""},
	{group.ErrDecl, adminRoutes, http.StatusBadRequest, "bad_group", ""},
	{group.ErrPruneLive, adminRoutes, http.StatusConflict, "period_live", ""},
	// A plain tag named like a grouped tag or one of its period rows.
	{group.ErrPeriodRow, adminRoutes, http.StatusConflict, "grouped_tag_row", ""},

	// The admin API's store calls.
	{store.ErrTagNotFound, adminRoutes, http.StatusNotFound, "tag_not_found", ""},
	{store.ErrTagExists, adminRoutes, http.StatusConflict, "tag_exists", ""},
	{store.ErrBelowTombstone, adminRoutes, http.StatusConflict, "below_tombstone",
		` (resend with "force": true and a "reason"; it is logged)`},
	{store.ErrBadStep, adminRoutes, http.StatusBadRequest, "bad_row", ""},
	{store.ErrBadRow, adminRoutes, http.StatusBadRequest, "bad_row", ""},
	{store.ErrOverflow, adminRoutes, http.StatusBadRequest, "bad_row", ""},
}

// failureOf returns the entry of failures for routes that err matches
// first, or fallback when none does.
func failureOf(err error, routes routeKind, fallback failure) failure {
	for _, f := range failures {
		if f.routes&routes != 0 && errors.Is(err, f.err) {
			return f
		}
	}
	return fallback
}

// idError answers a failed JSON-API ID request (batches, grouped tags)
// with the status and code of failures, with Leaf's code alongside; an
// error none matches is 503 not_ready (not_initialized for Leaf's -1). A
// 503 or 429 carries Retry-After: 1 s, or the time the clock is behind.
func (h *handler) idError(w http.ResponseWriter, r *http.Request, leafCode int64, err error) {
	fallback := failure{status: http.StatusServiceUnavailable, code: "not_ready"}
	if leafCode == -1 {
		fallback.code = "not_initialized"
	}
	f := failureOf(err, idRoutes, fallback)
	if f.status == http.StatusServiceUnavailable || f.status == http.StatusTooManyRequests {
		retry := time.Second
		var cb *snowflake.ClockBackwardsError
		if errors.As(err, &cb) && cb.Behind > retry {
			retry = cb.Behind
		}
		w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
	}
	if f.status >= 500 {
		h.logIDFailure(r.Context(), "batch request failed", err, leafCode, slog.String("path", r.URL.Path),
			slog.Int64("leaf_code", leafCode), slog.String("request_id", requestID(r)))
	}
	writeJSON(w, f.status, apiErrorBody{Status: f.status, Code: f.code, Message: err.Error() + f.hint, Path: rawPath(r), LeafCode: leafCode})
}

// storeError answers a failed admin call with the status and code of
// failures; an error none matches is 503 store_unavailable (the database
// did not answer, or answered an error of its own).
func (h *handler) storeError(w http.ResponseWriter, r *http.Request, err error) {
	f := failureOf(err, adminRoutes, failure{status: http.StatusServiceUnavailable, code: "store_unavailable"})
	h.apiError(w, r, f.status, f.code, err.Error()+f.hint)
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

// leafDecodeError answers a /decodeSnowflakeId?snowflakeId= that is not a
// Java long as Leaf does: 200 and its errorMsg field.
func leafDecodeError(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]string{"errorMsg": "snowflake Id反解析发生异常!"})
}

// dbPageError answers Leaf's /db page when leaf_alloc cannot be read: 503
// and a page that points to the server log, where err goes.
func (o *ops) dbPageError(w http.ResponseWriter, err error) {
	o.h.d.Logger.Warn("db page: read leaf_alloc", "err", err)
	o.writePage(w, http.StatusServiceUnavailable, `<!DOCTYPE html>
<html><head><title>Leaf</title></head>
<body><p>Reading leaf_alloc failed; see the server log.</p></body></html>`)
}
