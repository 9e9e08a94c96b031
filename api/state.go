package api

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-go/leaf/segment"
)

// Tracker tuning. The rate is the growth of Issued between the oldest and
// the newest snapshot of the last rateWindow, so it follows bursts within a
// few seconds and needs nobody to sample on a schedule: every scrape, every
// /api/v1/segment/buffers request and every error count takes a snapshot.
const (
	rateWindow      = 10 * time.Second
	minSampleGap    = 200 * time.Millisecond // closer snapshots are not kept
	maxSamples      = 64
	stepHistoryLen  = 16
	knownStaleAfter = 250 * time.Millisecond // error counting refreshes the served-tag set this often
	defaultRunway   = 60 * time.Second
)

// tracker derives what Stats does not hold (consumption rate, runway, step
// history) from successive snapshots. It is safe for concurrent use.
type tracker struct {
	gen *segment.Generator
	now func() time.Time

	mu sync.Mutex // guards tags, servedAt, gen, retired
	// tags holds the history of each tag seen InitOK in the last snapshot,
	// taken at servedAt: its keys are the served tags.
	tags     map[string]*tagHistory
	servedAt time.Time
	// epoch counts snapshots; a history not seen in the current one
	// (tagHistory.seen) is of a tag no longer served.
	epoch uint64
	// retired counts the IDs of buffers gone since the start (their tag
	// left the store or the buffer was re-created), as of the last snapshot
	// that saw them, so that the sum over every tag never goes back.
	retired int64
	// refreshing is true while isServed takes a snapshot.
	refreshing atomic.Bool
}

type tagHistory struct {
	samples []issuedSample // time-ordered, the first may be older than rateWindow
	steps   []stepChange   // the last stepHistoryLen changes, oldest first
	last    int64          // Issued in the last snapshot
	seen    uint64         // tracker.epoch of the last snapshot that had the tag InitOK
}

type issuedSample struct {
	at     time.Time
	issued int64
}

type stepChange struct {
	at   time.Time
	step int64
}

// bufferView is one tag's Stats plus what the tracker derived.
type bufferView struct {
	// BufferStats points into the snapshot's slice, so that a view costs
	// no copy of the stats (about 200 bytes a tag).
	*segment.BufferStats
	// Rate is IDs per second over the last rateWindow; 0 when unknown.
	Rate float64
	// Runway is Remaining / Rate in seconds, +Inf when Rate is 0.
	Runway float64
	Steps  []stepChange
}

func newTracker(gen *segment.Generator, now func() time.Time) *tracker {
	return &tracker{gen: gen, now: now, tags: map[string]*tagHistory{}}
}

// sample takes a Stats snapshot, records it and returns it with rates and
// step histories.
func (t *tracker) sample() []bufferView {
	views, _ := t.snapshot(true)
	return views
}

// snapshot takes a Stats snapshot, records it and returns it with rates,
// with the step histories when steps is true (one allocation per tag), and
// the IDs of buffers gone since the start (see tracker.retired).
func (t *tracker) snapshot(steps bool) ([]bufferView, int64) {
	stats := t.gen.Stats()
	now := t.now()
	views := make([]bufferView, len(stats))

	t.mu.Lock()
	defer t.mu.Unlock()
	t.epoch++
	for i := range stats {
		st := &stats[i]
		v := bufferView{BufferStats: st}
		var h *tagHistory
		v.Rate, v.Runway, h = t.record(now, st)
		if steps && h != nil {
			v.Steps = append([]stepChange(nil), h.steps...)
		}
		views[i] = v
	}
	t.endSnapshot(now)
	return views, t.retired
}

// visit is snapshot without the snapshot: it calls f with every tag's stats
// (valid during the call only), rate and runway, in no particular order,
// and returns the IDs of buffers gone since the start. It holds no
// memory per tag beyond the histories, so that a /metrics scrape at
// 100,000 tags neither sorts nor copies them. f runs under t.mu: it must not
// call the tracker.
func (t *tracker) visit(f func(st *segment.BufferStats, rate, runway float64)) int64 {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.epoch++
	t.gen.EachStat(func(st *segment.BufferStats) bool {
		rate, runway, _ := t.record(now, st)
		f(st, rate, runway)
		return true
	})
	t.endSnapshot(now)
	return t.retired
}

// record records st, taken at now, in its tag's history (a served tag's
// only) and returns the rate, the runway (+Inf when the rate is 0) and the
// history (nil for a tag not served). The caller holds t.mu.
func (t *tracker) record(now time.Time, st *segment.BufferStats) (rate, runway float64, h *tagHistory) {
	runway = math.Inf(1)
	if !st.InitOK {
		return 0, runway, nil
	}
	h = t.tags[st.BizTag]
	if h == nil {
		h = &tagHistory{}
		t.tags[st.BizTag] = h
	}
	h.seen = t.epoch
	if st.Issued < h.last {
		t.retired += h.last // the buffer was re-created
	}
	h.last = st.Issued
	rate = h.add(now, st)
	if rate > 0 && !st.Ordered { // an ordered tag buffers nothing: no runway to run out of
		runway = float64(st.Remaining) / rate
	}
	return rate, runway, h
}

// endSnapshot forgets the tags the snapshot of epoch t.epoch did not see
// served, counting their IDs as retired. The caller holds t.mu.
func (t *tracker) endSnapshot(now time.Time) {
	for tag, h := range t.tags {
		if h.seen != t.epoch {
			t.retired += h.last
			delete(t.tags, tag)
		}
	}
	t.servedAt = now
}

// add records st taken at now and returns the rate in IDs per second.
func (h *tagHistory) add(now time.Time, st *segment.BufferStats) float64 {
	if n := len(h.steps); n == 0 || h.steps[n-1].step != st.Step {
		at := st.LastLoad
		if at.IsZero() {
			at = now
		}
		h.steps = append(h.steps, stepChange{at: at, step: st.Step})
		if len(h.steps) > stepHistoryLen {
			h.steps = h.steps[len(h.steps)-stepHistoryLen:]
		}
	}
	if n := len(h.samples); n > 0 && st.Issued < h.samples[n-1].issued {
		h.samples = h.samples[:0] // the buffer was re-created
	}
	if n := len(h.samples); n == 0 || now.Sub(h.samples[n-1].at) >= minSampleGap {
		h.samples = append(h.samples, issuedSample{at: now, issued: st.Issued})
	}
	// Drop samples older than the window, but keep the newest of those as
	// the base when nothing else is left to compare with.
	cut := 0
	for cut < len(h.samples)-2 && now.Sub(h.samples[cut+1].at) >= rateWindow {
		cut++
	}
	if len(h.samples)-cut > maxSamples {
		cut = len(h.samples) - maxSamples
	}
	h.samples = h.samples[cut:]
	// The snapshot counts even when it was too close to be kept.
	first := h.samples[0]
	dt := now.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(st.Issued-first.issued) / dt
}

// isServed reports whether tag was InitOK in the last snapshot. A tag not
// in it is looked up again in a new snapshot when the last one is older than
// knownStaleAfter; one caller takes it while the others answer from the old
// one, so that a storm of errors costs at most a few Stats calls a second.
func (t *tracker) isServed(tag string) bool {
	t.mu.Lock()
	ok := t.tags[tag] != nil
	stale := t.now().Sub(t.servedAt) >= knownStaleAfter
	t.mu.Unlock()
	if ok || !stale || !t.refreshing.CompareAndSwap(false, true) {
		return ok
	}
	defer t.refreshing.Store(false)
	t.sample()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tags[tag] != nil
}

// The JSON of GET /api/v1/segment/buffers. IDs and counters that can pass
// 2^53 are strings; steps (at most 2^31) are numbers.
type buffersJSON struct {
	Time              time.Time `json:"time"`
	RunwayWarnSeconds float64   `json:"runwayWarnSeconds"`
	// Total is the number of buffers that match the prefix; Buffers holds
	// at most limit of them, from the cursor on.
	Total   int          `json:"total"`
	Buffers []bufferJSON `json:"buffers"`
	// Next is the cursor of the next page; "" (omitted) on the last page.
	Next string `json:"next,omitempty"`
}

type bufferJSON struct {
	BizTag                 string     `json:"bizTag"`
	InitOK                 bool       `json:"initOk"`
	NextReady              bool       `json:"nextReady"`
	Loading                bool       `json:"loading"`
	Pos                    int        `json:"pos"`
	Segments               [2]segJSON `json:"segments"`
	Step                   int64      `json:"step"`
	MinStep                int64      `json:"minStep"`
	LastLoad               *time.Time `json:"lastLoad"`
	LastLoadLatencySeconds float64    `json:"lastLoadLatencySeconds"`
	LoadFailures           string     `json:"loadFailures"`
	LastError              string     `json:"lastError"`
	// Refusing is true while the tag refuses segments below its high-water
	// mark (the database went back in time; fence the tag forward).
	Refusing bool `json:"refusing"`
	// HighWater is the highest max_id this server was ever given for the
	// tag (persisted in its data dir), as a string.
	HighWater     string        `json:"highWater"`
	RetryAt       *time.Time    `json:"retryAt"`
	Issued        string        `json:"issued"`
	Remaining     string        `json:"remaining"`
	Rate          float64       `json:"rate"`
	RunwaySeconds *float64      `json:"runwaySeconds"`
	StepHistory   []stepChangeJ `json:"stepHistory"`
	// Ordered is true for an ordered tag (docs/contract.md §12): no
	// buffered segment, one database write per batch of concurrent
	// requests; Batches counts those writes, as a string.
	Ordered bool   `json:"ordered"`
	Batches string `json:"batches"`
}

type segJSON struct {
	Current bool   `json:"current"`
	Value   string `json:"value"`
	Max     string `json:"max"`
	Step    int64  `json:"step"`
	Idle    string `json:"idle"`
	// Used is the spent fraction of the segment, 0..1, for drawing.
	Used float64 `json:"used"`
}

type stepChangeJ struct {
	Time time.Time `json:"time"`
	Step int64     `json:"step"`
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func toJSON(v bufferView) bufferJSON {
	b := bufferJSON{
		BizTag:                 v.BizTag,
		InitOK:                 v.InitOK,
		NextReady:              v.NextReady,
		Loading:                v.Loading,
		Pos:                    v.Pos,
		Step:                   v.Step,
		MinStep:                v.MinStep,
		LastLoad:               timePtr(v.LastLoad),
		LastLoadLatencySeconds: v.LastLoadLatency.Seconds(),
		LoadFailures:           i64(v.LoadFailures),
		LastError:              v.LastError,
		Refusing:               v.Refusing,
		HighWater:              i64(v.HighWater),
		RetryAt:                timePtr(v.RetryAt),
		Issued:                 i64(v.Issued),
		Remaining:              i64(v.Remaining),
		Rate:                   v.Rate,
		StepHistory:            make([]stepChangeJ, len(v.Steps)),
		Ordered:                v.Ordered,
		Batches:                i64(v.Batches),
	}
	if !math.IsInf(v.Runway, 0) && v.InitOK {
		r := v.Runway
		b.RunwaySeconds = &r
	}
	for i, s := range v.Segments {
		size := s.Step
		if start := max(s.Max-s.Step, 1); s.Max > start {
			size = s.Max - start
		}
		var used float64
		if size > 0 {
			used = float64(size-s.Idle()) / float64(size)
		}
		b.Segments[i] = segJSON{
			Current: i == v.Pos && v.InitOK,
			Value:   i64(s.Value),
			Max:     i64(s.Max),
			Step:    s.Step,
			Idle:    i64(s.Idle()),
			Used:    min(max(used, 0), 1),
		}
	}
	for i, s := range v.Steps {
		b.StepHistory[i] = stepChangeJ{Time: s.at.UTC(), Step: s.step}
	}
	return b
}

// Paging of GET /api/v1/segment/buffers.
const (
	defaultBuffersLimit = 100
	maxBuffersLimit     = 1000
)

// bufferOrder is the order of the buffers route: "runway" (the default:
// tags refusing segments first, then by runway, shortest first, tags
// without a runway — not loaded yet, or idle — last, ties by tag) or
// "tag" (by tag).
type bufferOrder string

// before reports whether a sorts before b in order o.
func (o bufferOrder) before(a, b bufferView) bool {
	if o == "runway" {
		if a.Refusing != b.Refusing {
			return a.Refusing
		}
		ra, rb := runwayKey(a), runwayKey(b)
		if ra != rb {
			return ra < rb
		}
	}
	return a.BizTag < b.BizTag
}

// runwayKey is v's runway for sorting: +Inf when it has none.
func runwayKey(v bufferView) float64 {
	if !v.InitOK {
		return math.Inf(1)
	}
	return v.Runway
}

// cursorOf is the cursor that starts the page after v: the sort key of v.
// For "runway" it is "<r|i>:<runway>:<tag>" (r for a refusing tag), for
// "tag" the tag. Cursors are opaque to clients.
func (o bufferOrder) cursorOf(v bufferView) string {
	if o != "runway" {
		return "t:" + v.BizTag
	}
	flag := "i"
	if v.Refusing {
		flag = "r"
	}
	return flag + ":" + strconv.FormatFloat(runwayKey(v), 'g', -1, 64) + ":" + v.BizTag
}

// parseCursor turns a cursor back into a view with the cursor's sort key;
// ok is false for a cursor this order did not make.
func (o bufferOrder) parseCursor(c string) (v bufferView, ok bool) {
	if o != "runway" {
		tag, ok := strings.CutPrefix(c, "t:")
		return bufferView{BufferStats: &segment.BufferStats{BizTag: tag}}, ok
	}
	flag, rest, ok1 := strings.Cut(c, ":")
	num, tag, ok2 := strings.Cut(rest, ":")
	r, err := strconv.ParseFloat(num, 64)
	if !ok1 || !ok2 || (flag != "r" && flag != "i") || err != nil || math.IsNaN(r) {
		return bufferView{}, false
	}
	v = bufferView{BufferStats: &segment.BufferStats{BizTag: tag, Refusing: flag == "r", InitOK: !math.IsInf(r, 1)}, Runway: r}
	return v, true
}

// segmentBuffers serves GET /api/v1/segment/buffers: the buffers whose tag
// starts with ?prefix= (default all), in ?sort= order (runway, the default,
// or tag), at most ?limit= of them (1 to 1,000, default 100), from ?cursor=
// on (the "next" of the previous page). The answer holds the number of
// matching buffers and, while more remain, the cursor of the next page. The
// order is of the snapshot each request takes: a tag whose runway changed
// between two pages may show on both or on neither. Errors: 400 bad_limit,
// bad_sort, bad_cursor.
func (o *ops) segmentBuffers(w http.ResponseWriter, r *http.Request) {
	if o.tracker == nil {
		o.h.disabled(w, r, "segment", enableSegment)
		return
	}
	q := r.URL.Query()
	limit := defaultBuffersLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxBuffersLimit {
			o.h.apiError(w, r, http.StatusBadRequest, "bad_limit", fmt.Sprintf("limit must be an integer from 1 to %d, got %q", maxBuffersLimit, s))
			return
		}
		limit = n
	}
	order := bufferOrder(q.Get("sort"))
	switch order {
	case "":
		order = "runway"
	case "runway", "tag":
	default:
		o.h.apiError(w, r, http.StatusBadRequest, "bad_sort", fmt.Sprintf("sort must be runway or tag, got %q", order))
		return
	}
	var after *bufferView
	if c := q.Get("cursor"); c != "" {
		v, ok := order.parseCursor(c)
		if !ok {
			o.h.apiError(w, r, http.StatusBadRequest, "bad_cursor", fmt.Sprintf("cursor %q was not made by this route with sort=%s: use the next of the previous page", c, order))
			return
		}
		after = &v
	}
	prefix := q.Get("prefix")

	views := o.tracker.sample()
	match := views[:0]
	for _, v := range views {
		if strings.HasPrefix(v.BizTag, prefix) {
			match = append(match, v)
		}
	}
	slices.SortFunc(match, func(a, b bufferView) int {
		switch {
		case order.before(a, b):
			return -1
		case order.before(b, a):
			return 1
		}
		return 0
	})
	start := 0
	if after != nil {
		start, _ = slices.BinarySearchFunc(match, *after, func(e, t bufferView) int {
			if order.before(t, e) {
				return 1 // e comes after the cursor's item: the page may start here
			}
			return -1
		})
	}
	end := min(start+limit, len(match))
	out := buffersJSON{
		Time:              o.h.d.Now().UTC(),
		RunwayWarnSeconds: o.runwayWarn.Seconds(),
		Total:             len(match),
		Buffers:           make([]bufferJSON, 0, end-start),
	}
	for _, v := range match[start:end] {
		out.Buffers = append(out.Buffers, toJSON(v))
	}
	if end < len(match) && end > start {
		out.Next = order.cursorOf(match[end-1])
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}
