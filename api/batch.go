package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/snowflake"
)

// DefaultMaxBatch is the largest count the batch routes accept when
// [Deps.MaxBatch] is zero, in IDs.
const DefaultMaxBatch = 10_000

// batchAnswer is the JSON of the batch routes. IDs are strings because 64-bit
// IDs pass JavaScript's 2^53.
type batchAnswer struct {
	IDs []string `json:"ids"`
}

// count reads ?count=N: absent means 1; otherwise it must be given once, as
// plain decimal digits (no sign, space, "0x" or exponent; leading zeros are
// harmless and allowed) with a value from 1 to MaxBatch. Anything else is
// answered 400 bad_count, naming the parameter and the range.
func (h *handler) count(w http.ResponseWriter, r *http.Request) (int, bool) {
	vals, ok := r.URL.Query()["count"]
	if !ok {
		return 1, true
	}
	want := "count must be an integer from 1 to " + strconv.Itoa(h.d.MaxBatch)
	if len(vals) != 1 {
		h.apiError(w, r, http.StatusBadRequest, "bad_count",
			want+", given once; got it "+strconv.Itoa(len(vals))+" times")
		return 0, false
	}
	raw := vals[0]
	n, ok := parseCount(raw, h.d.MaxBatch)
	if !ok {
		h.apiError(w, r, http.StatusBadRequest, "bad_count", want+" (decimal digits only), got "+strconv.Quote(raw))
		return 0, false
	}
	return n, true
}

// parseCount returns the value of s when s is one or more decimal digits
// with a value from 1 to limit; it never overflows, however long s is.
func parseCount(s string, limit int) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > limit/10 {
			return 0, false
		}
		if n = n*10 + int(c-'0'); n > limit {
			return 0, false
		}
	}
	return n, n >= 1
}

// batchArgs reads what every segment batch route takes: the {tag} path key and the count
// query parameter (see count). On bad input it answers 400 (bad_tag, bad_count) itself and
// returns ok false.
func (h *handler) batchArgs(w http.ResponseWriter, r *http.Request) (tag string, n int, ok bool) {
	tag, err := PathKey(r, "tag")
	if err != nil {
		h.apiError(w, r, http.StatusBadRequest, "bad_tag", err.Error())
		return "", 0, false
	}
	n, ok = h.count(w, r)
	return tag, n, ok
}

// segmentBatch is GET /api/v1/segment/{tag}?count=N. Each ID is one atomic
// add on the SegmentBuffer (no lock per ID); a batch may span segments. For
// an ordered tag the N IDs come from one allocation shared with the
// concurrent requests ([segment.Generator.GetN]). If
// an error stops the batch part-way, the IDs taken so far are skipped, never
// handed out later: the answer is the error.
func (h *handler) segmentBatch(w http.ResponseWriter, r *http.Request) {
	tag, n, ok := h.batchArgs(w, r)
	if !ok {
		return
	}
	if h.d.Segment == nil {
		h.disabled(w, r, "segment", segmentHow)
		return
	}
	if h.groupBatchGuard(w, r, tag) { // group.go
		return
	}
	got := make([]int64, n)
	if err := h.d.Segment.GetN(r.Context(), tag, got); err != nil {
		// A name with no leaf_alloc row may be a grouped tag declared by
		// leafctl or another server since this one read leaf_group.
		if errors.Is(err, segment.ErrTagNotFound) && h.groupDeclaredElsewhere(r, tag) && h.groupBatchGuard(w, r, tag) {
			return
		}
		h.idError(w, r, segment.Code(err), err)
		return
	}
	ids := make([]string, 0, n)
	var buf [20]byte
	for _, id := range got {
		ids = append(ids, string(strconv.AppendInt(buf[:0], id, 10)))
	}
	writeJSON(w, http.StatusOK, batchAnswer{IDs: ids})
}

// snowflakeBatch is GET /api/v1/snowflake?count=N.
func (h *handler) snowflakeBatch(w http.ResponseWriter, r *http.Request) {
	n, ok := h.count(w, r)
	if !ok {
		return
	}
	gen, _ := h.snowflakeInUse()
	if gen == nil {
		h.disabled(w, r, "snowflake", snowflakeHow)
		return
	}
	ids := make([]string, 0, n)
	var buf [20]byte
	for range n {
		id, err := gen.Next(r.Context())
		if err != nil {
			h.idError(w, r, snowflake.Code(err), err)
			return
		}
		ids = append(ids, string(strconv.AppendInt(buf[:0], id, 10)))
	}
	writeJSON(w, http.StatusOK, batchAnswer{IDs: ids})
}
