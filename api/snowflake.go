package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leaf-go/leaf/snowflake"
)

// segmentHow is what a route of a disabled segment mode tells the client to do.
const segmentHow = "start leaf-server with --segment (LEAF_SEGMENT=true) and a --segment-dsn"

// snowflakeHow is what a route of a disabled snowflake mode tells the client to do.
const snowflakeHow = "start leaf-server with --snowflake (LEAF_SNOWFLAKE=true) and a --worker-id-source (static, zookeeper, sql, etcd or kubernetes)"

// layout is the generator's layout, or Leaf's default when snowflake mode is
// off (decoding needs no generator).
func (h *handler) layout() snowflake.Layout {
	if gen, _ := h.snowflakeInUse(); gen != nil {
		return gen.Layout()
	}
	return snowflake.DefaultLayout()
}

// leafDecoded is Leaf's /decodeSnowflakeId answer: strings, in the order
// Leaf's HashMap gives its keys.
type leafDecoded struct {
	WorkerID   string `json:"workerId"`
	SequenceID string `json:"sequenceId"`
	Timestamp  string `json:"timestamp"`
}

// maxFormBody bounds a form body read for /decodeSnowflakeId, in bytes.
const maxFormBody = 64 << 10

// decodeSnowflakeID is Leaf's /decodeSnowflakeId?snowflakeId=N, any method:
// 200 and a JSON object of strings, timestamp formatted
// "<ms>(yyyy-MM-dd HH:mm:ss.SSS)" in the server's local time zone as Leaf's
// SimpleDateFormat does. As Leaf's @RequestParam, the parameter is read from
// the query, else from a form body; a missing one is Spring's 400
// (MissingServletRequestParameterException). A value that is not a Java long
// (Long.parseLong: optional sign, ASCII digits here) gets 200 and Leaf's
// errorMsg. A negative ID is decoded as Leaf decodes it: arithmetic shifts,
// so -1 is worker 1023, sequence 4095, one millisecond before the epoch.
func (h *handler) decodeSnowflakeID(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("snowflakeId") {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
		if err := r.ParseForm(); err == nil {
			q = r.PostForm
		}
	}
	if !q.Has("snowflakeId") {
		h.springError(w, r, http.StatusBadRequest, "org.springframework.web.bind.MissingServletRequestParameterException",
			"Required String parameter 'snowflakeId' is not present")
		return
	}
	id, err := strconv.ParseInt(q.Get("snowflakeId"), 10, 64)
	if err != nil {
		leafDecodeError(w)
		return
	}
	l := h.layout()
	p := l.Decompose(id)
	if id < 0 {
		p.Millis = id>>(l.WorkerBits+l.SequenceBits) + l.EpochMillis()
	}
	writeJSON(w, http.StatusOK, leafDecoded{
		WorkerID:   strconv.FormatInt(p.Worker, 10),
		SequenceID: strconv.FormatInt(p.Sequence, 10),
		Timestamp:  strconv.FormatInt(p.Millis, 10) + "(" + time.UnixMilli(p.Millis).Format("2006-01-02 15:04:05.000") + ")",
	})
}

func (h *handler) view(id int64) snowflake.Description { return h.layout().Describe(id) }

// decode is GET /api/v1/snowflake/decode/{id}: id is a decimal integer from
// 0 to the layout's largest ID (9223372036854775807 for 63 bits, 2^53-1 for a
// 53-bit layout), read once unescaped, so an escaped ID is the
// same ID ("%35" is 5, "%2B5" is "+5" is 5, as for leafctl decode and Java's
// Long.parseLong). Anything else is 400 bad_id.
func (h *handler) decode(w http.ResponseWriter, r *http.Request) {
	raw := chi.URLParam(r, "id")
	if r.URL.RawPath != "" { // chi hands over the escaped segment then
		if s, err := url.PathUnescape(raw); err == nil {
			raw = s
		}
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 {
		h.apiError(w, r, http.StatusBadRequest, "bad_id", "id must be a non-negative 64-bit decimal integer, got "+strconv.Quote(raw))
		return
	}
	l := h.layout()
	if id > l.MaxID() {
		// A narrower layout (--time-bits + --worker-bits + --sequence-bits
		// below 63) never makes such an ID: decoding it would drop bits.
		h.apiError(w, r, http.StatusBadRequest, "bad_id", fmt.Sprintf("id %d is above %d, the largest ID of the server's %d-bit layout", id, l.MaxID(), l.Bits()))
		return
	}
	writeJSON(w, http.StatusOK, l.Describe(id))
}

// encode is GET /api/v1/snowflake/encode?timestamp=&worker=&sequence= (or
// datacenter=&machine= instead of worker). timestamp is Unix ms.
func (h *handler) encode(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	num := func(name string, required bool) (int64, bool) {
		s := q.Get(name)
		if s == "" && !required {
			return 0, true
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			h.apiError(w, r, http.StatusBadRequest, "bad_"+name, name+" must be a decimal integer, got "+strconv.Quote(s))
			return 0, false
		}
		return n, true
	}
	ms, ok := num("timestamp", true)
	if !ok {
		return
	}
	seq, ok := num("sequence", false)
	if !ok {
		return
	}
	l := h.layout()
	var id int64
	var err error
	if q.Has("datacenter") || q.Has("machine") {
		if q.Has("worker") {
			h.apiError(w, r, http.StatusBadRequest, "bad_worker", "give worker or datacenter+machine, not both")
			return
		}
		dc, ok := num("datacenter", true)
		if !ok {
			return
		}
		m, ok := num("machine", true)
		if !ok {
			return
		}
		id, err = l.ComposeTwitter(ms, dc, m, seq)
	} else {
		worker, ok := num("worker", false)
		if !ok {
			return
		}
		id, err = l.Compose(ms, worker, seq)
	}
	if err != nil {
		h.apiError(w, r, http.StatusBadRequest, "out_of_range", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, h.view(id))
}

// snowflakeStatus is GET /api/v1/snowflake/status.
func (h *handler) snowflakeStatus(w http.ResponseWriter, r *http.Request) {
	gen, src := h.snowflakeInUse()
	if gen == nil {
		h.disabled(w, r, "snowflake", snowflakeHow)
		return
	}
	s := gen.Stats()
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	out := map[string]any{
		"workerId":            s.WorkerID,
		"source":              sourceName(src),
		"lastIssued":          ts(s.LastIssued),
		"floor":               ts(s.Floor),
		"highWater":           ts(s.HighWater),
		"issued":              strconv.FormatInt(s.Issued, 10),
		"clockBackwardEvents": s.ClockBackwardEvents,
		"clockBackwardWaitMs": s.ClockBackwardWait.Milliseconds(),
		"sequenceWaits":       s.SequenceWaits,
		"highWaterStores":     s.HighWaterStores,
		"highWaterFailures":   s.HighWaterFailures,
		"layout":              s.Layout.Describe(0).Layout,
		"layoutEnd":           ts(s.Layout.End()),
	}
	perMs, workers := s.Layout.Capacity()
	out["idsPerMsPerWorker"], out["workers"] = perMs, workers
	if src != nil {
		if details := src.Details(); details != nil {
			out["sourceState"] = details
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// sourceName is the worker ID source's name, "" without one.
func sourceName(src snowflake.Source) string {
	if src == nil {
		return ""
	}
	return src.Name()
}
