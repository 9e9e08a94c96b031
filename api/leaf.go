package api

import (
	"net/http"
	"strconv"

	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/snowflake"
)

// leafMethods are the methods Leaf's method-less mappings serve, in the
// order of the Allow header Spring 4.3 answers OPTIONS with (every
// HttpMethod but TRACE).
const leafMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

// leafOptions answers OPTIONS on Leaf's ID routes as Spring does: 200, an
// Allow header and no body; no ID is taken.
func leafOptions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", leafMethods)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// segmentGet is Leaf's SegmentService endpoint: 200 text/plain decimal ID
// with no newline, or 500 with Leaf's error body and code.
func (h *handler) segmentGet(w http.ResponseWriter, r *http.Request) {
	key, ok := h.key(w, r)
	if !ok {
		return
	}
	if h.d.Segment == nil {
		h.disabled(w, r, "segment", "start leaf-server with --segment (LEAF_SEGMENT=true) and a --segment-dsn")
		return
	}
	id, err := h.d.Segment.GetFor(r.Context(), key, clientAddr(r))
	if err != nil {
		h.leafError(w, r, segment.Code(err), err)
		return
	}
	writeID(w, id)
}

func (h *handler) emptyKey(w http.ResponseWriter, r *http.Request) {
	h.badRequest(w, r, "biz_tag key is empty: use /api/…/get/{key} with 1 to 128 characters")
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
	if h.d.Snowflake == nil {
		h.disabled(w, r, "snowflake", snowflakeHow)
		return
	}
	id, err := h.d.Snowflake.Next(r.Context())
	if err != nil {
		h.leafError(w, r, snowflake.Code(err), err)
		return
	}
	writeID(w, id)
}

// textPlain is the Content-Type of an ID, as Leaf's Spring server sends it.
// writeID assigns the slice itself instead of calling Header.Set, which
// would allocate a new one per response; nothing appends to or changes it.
var textPlain = []string{"text/plain;charset=UTF-8"}

func writeID(w http.ResponseWriter, id int64) {
	w.Header()["Content-Type"] = textPlain
	var buf [20]byte
	_, _ = w.Write(strconv.AppendInt(buf[:0], id, 10))
}
