package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/snowflake"
)

// leafMethods are the methods Leaf's method-less mappings serve, as Spring
// 4.3's DispatcherServlet lists them in the Allow header of its OPTIONS
// answer: every HttpMethod but TRACE, comma-separated without spaces.
const leafMethods = "GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS"

// leafOptions answers OPTIONS on Leaf's routes as Spring does: 200, an Allow
// header and no body; no ID is taken.
func leafOptions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", leafMethods)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// segmentGet is Leaf's SegmentService endpoint: 200 and the decimal ID with
// no newline, typed as the Accept header asks (idContentType), or 500 with
// Leaf's error body and code.
func (h *handler) segmentGet(w http.ResponseWriter, r *http.Request) {
	key, ok := h.key(w, r)
	if !ok {
		return
	}
	if h.d.Segment == nil {
		h.disabled(w, r, "segment", segmentHow)
		return
	}
	if h.groupLeafGet(w, r, key) { // grouped tag or period row (group.go)
		return
	}
	id, err := h.d.Segment.Get(r.Context(), key)
	if errors.Is(err, segment.ErrTagNotFound) && h.groupDeclaredElsewhere(r, key) && h.groupLeafGet(w, r, key) {
		return
	}
	if err != nil {
		h.leafError(w, r, segment.Code(err), err)
		return
	}
	h.writeID(w, r, id)
}

// emptyKey answers /api/…/get and /api/…/get/ as Leaf's Spring does: no
// mapping matches, so 404 with Spring's "No message available" body.
func (h *handler) emptyKey(w http.ResponseWriter, r *http.Request) {
	h.springError(w, r, http.StatusNotFound, "", springNoMessage)
}

// key reads and validates {key}; on failure it has answered 400.
func (h *handler) key(w http.ResponseWriter, r *http.Request) (string, bool) {
	key, err := PathKey(r, "key")
	if err != nil {
		h.badRequest(w, r, err.Error())
		return "", false
	}
	return key, true
}

// snowflakeGet is Leaf's snowflake endpoint: the key is validated and
// otherwise ignored, as in Leaf.
func (h *handler) snowflakeGet(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.key(w, r); !ok {
		return
	}
	gen, _ := h.snowflakeInUse()
	if gen == nil {
		h.disabled(w, r, "snowflake", snowflakeHow)
		return
	}
	id, err := gen.Next(r.Context())
	if err != nil {
		h.leafError(w, r, snowflake.Code(err), err)
		return
	}
	h.writeID(w, r, id)
}

// textPlainUTF8 is the Content-Type of an ID when the client states no
// preference, as Leaf's Spring server sends it.
const textPlainUTF8 = "text/plain;charset=UTF-8"

// textPlain is textPlainUTF8 as a header value. writeID assigns the slice
// itself instead of calling Header.Set, which would allocate a new one per
// response; nothing appends to or changes it.
var textPlain = []string{textPlainUTF8}

// writeID answers 200 and id in decimal, typed by idContentType from r's
// Accept header (through h.accepts). No header and "*/*" (curl, Go's
// client, most SDKs) take the path without parsing.
func (h *handler) writeID(w http.ResponseWriter, r *http.Request, id int64) {
	if accept := r.Header.Get("Accept"); accept == "" || accept == "*/*" {
		w.Header()["Content-Type"] = textPlain
	} else {
		w.Header()["Content-Type"] = []string{h.accepts.contentType(accept)}
	}
	// The digits go through an interface call, so a local array would be
	// moved to the heap; the metrics middleware's pooled writer lends its own.
	var buf []byte
	if sw, ok := w.(*statusWriter); ok {
		buf = sw.digits[:0]
	}
	_, _ = w.Write(strconv.AppendInt(buf, id, 10))
}
