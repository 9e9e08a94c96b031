package api

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/snowflake"
)

// Metric label values used where the real value would be unbounded.
const (
	// routeUnmatched is the route label of requests no route matched.
	routeUnmatched = "unmatched"
	// methodOther is the method label of methods outside the standard set.
	methodOther = "OTHER"
	// segmentGetRoute is the chi pattern of Leaf's segment route; its 500
	// answers are counted by Leaf code.
	segmentGetRoute = "/api/segment/get/{key}"
)

// latencyBuckets are the HTTP and load latency buckets, in seconds: 100 µs
// (an ID from memory over loopback) to 10 s (a load that hit its timeout).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// httpMetrics is the request middleware's state.
type httpMetrics struct {
	requests *prometheus.CounterVec   // route, method, code
	duration *prometheus.HistogramVec // route, method
	// origin is the zero of the request timer: time.Since(origin) reads
	// only the monotonic clock, where time.Now reads the wall clock too
	// (43 ns instead of 70 ns of CPU on the VM of BENCHMARKS.md).
	origin time.Time
	// writers recycles the statusWriters, one per request otherwise.
	writers sync.Pool // *statusWriter
	// series caches the resolved children by label values, so that the hot
	// path does one lock-free map read instead of hashing the labels under
	// the vectors' read lock.
	series sync.Map // seriesKey -> *seriesPair
	// segErrs counts failed segment requests by tag and Leaf code; nil when
	// segment mode is off.
	segErrs *tagErrors
}

type seriesKey struct {
	route, method string
	code          int
}

type seriesPair struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newHTTPMetrics() *httpMetrics {
	return &httpMetrics{
		origin:  time.Now(),
		writers: sync.Pool{New: func() any { return new(statusWriter) }},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaf_http_requests_total",
			Help: "HTTP requests answered, by chi route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leaf_http_request_duration_seconds",
			Help:    "Time from request routing to the handler's return, by chi route pattern and method.",
			Buckets: latencyBuckets,
		}, []string{"route", "method"}),
	}
}

func (m *httpMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.duration}
}

// middleware counts and times every request. The route label is chi's
// RoutePattern, read after the handler ran (only then is it complete).
func (m *httpMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Since(m.origin)
		sw := m.writers.Get().(*statusWriter)
		sw.ResponseWriter = w
		completed := false
		defer func() {
			if !completed {
				// The handler panicked; Recoverer, outside us, answers 500.
				sw.status = http.StatusInternalServerError
			}
			m.observe(r, sw, time.Since(m.origin)-start)
			// Handlers do not keep the writer past their return.
			*sw = statusWriter{sniff: sw.sniff[:0]}
			m.writers.Put(sw)
		}()
		next.ServeHTTP(sw, r)
		completed = true
	})
}

func (m *httpMetrics) observe(r *http.Request, sw *statusWriter, elapsed time.Duration) {
	route := routeUnmatched
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			route = p
		}
	}
	code := sw.status
	if code == 0 {
		code = http.StatusOK
	}
	k := seriesKey{route: route, method: normalMethod(r.Method), code: code}
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, &seriesPair{
			requests: m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.code)),
			duration: m.duration.WithLabelValues(k.route, k.method),
		})
	}
	p := v.(*seriesPair)
	p.requests.Inc()
	p.duration.Observe(elapsed.Seconds())

	if m.segErrs != nil && code == http.StatusInternalServerError && route == segmentGetRoute {
		if c, ok := leafCode(sw.sniff); ok {
			tag, err := PathKey(r, "key")
			if err != nil {
				tag = ""
			}
			m.segErrs.add(tag, c)
		}
	}
}

// normalMethod keeps the label set small: unknown methods become OTHER.
func normalMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodHead, http.MethodPatch, http.MethodOptions:
		return m
	}
	return methodOther
}

// sniffLen is how much of a 500 answer statusWriter keeps to read the Leaf
// code from; Leaf's body names it within its first 200 bytes.
const sniffLen = 512

// statusWriter records the status code, and the start of the body of a 500
// answer so that the Leaf result code can be counted.
type statusWriter struct {
	http.ResponseWriter
	status int
	sniff  []byte
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status == http.StatusInternalServerError && len(w.sniff) < sniffLen {
		w.sniff = append(w.sniff, b[:min(len(b), sniffLen-len(w.sniff))]...)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// leafCode reads the code out of a Leaf error body,
// "…Result{id=-2, status=EXCEPTION}…"; ok is false when there is none.
func leafCode(body []byte) (int64, bool) {
	const marker = "Result{id="
	i := bytes.Index(body, []byte(marker))
	if i < 0 {
		return 0, false
	}
	rest := body[i+len(marker):]
	j := bytes.IndexByte(rest, ',')
	if j < 0 {
		return 0, false
	}
	c, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil || c > -1 || c < -3 {
		return 0, false
	}
	return c, true
}

// tagErrors counts failed segment requests by biz_tag and Leaf code. A tag
// gets its own series only while it is a served tag of the generator (known
// decides); every other failure, unknown tags included, is counted under an
// empty biz_tag, which Prometheus shows as no tag label at all.
type tagErrors struct {
	vec   *prometheus.CounterVec
	known func(tag string) bool

	mu sync.Mutex // guards tags
	// tags are the biz_tag values that have children in vec, so that the
	// collector can delete those of tags that left the store.
	tags map[string]struct{}
}

func newTagErrors(known func(string) bool) *tagErrors {
	return &tagErrors{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaf_segment_errors_total",
			Help: "Failed /api/segment/get requests by Leaf code (-1 not initialised, -2 unknown tag, -3 no segment); biz_tag is empty for tags not served.",
		}, []string{"biz_tag", "code"}),
		known: known,
		tags:  map[string]struct{}{},
	}
}

func (e *tagErrors) add(tag string, code int64) {
	if code == -2 || !e.known(tag) {
		tag = ""
	}
	if tag != "" {
		e.mu.Lock()
		e.tags[tag] = struct{}{}
		e.mu.Unlock()
	}
	e.vec.WithLabelValues(tag, strconv.FormatInt(code, 10)).Inc()
}

// prune deletes the series of tags not in live.
func (e *tagErrors) prune(live map[string]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for t := range e.tags {
		if !live[t] {
			e.vec.DeletePartialMatch(prometheus.Labels{"biz_tag": t})
			delete(e.tags, t)
		}
	}
}

// LoadMetrics counts and times segment loads for /metrics:
// leaf_segment_loads_total{biz_tag,result} and
// leaf_segment_load_duration_seconds{biz_tag}. Pass its Observe method as
// [segment.Config.OnLoad] and the value in [Deps.LoadMetrics], so that the
// handler registers the two metrics and deletes the series of tags that left
// the store. It is safe for concurrent use.
//
// A load is labelled with its biz_tag when the tag is known to exist in the
// store ([segment.LoadEvent.Known]: the allocation succeeded, or the tag was in
// the last tag list read); other failures are counted under an empty
// biz_tag, so that probing random tags never creates series. A lookup of a
// tag the store does not have is not a load: the generator does not report
// it.
type LoadMetrics struct {
	loads    *prometheus.CounterVec   // biz_tag, result
	duration *prometheus.HistogramVec // biz_tag

	mu sync.Mutex // guards labelled
	// labelled are the biz_tag values with children in the vectors.
	labelled map[string]struct{}
}

// NewLoadMetrics returns the two load metrics, unregistered: give the result
// to [NewHandler] in [Deps.LoadMetrics].
func NewLoadMetrics() *LoadMetrics {
	return &LoadMetrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaf_segment_loads_total",
			Help: "Segment allocation transactions by result (ok, error); biz_tag is empty for failures of tags not in the last tag list; a lookup of an unknown tag is not counted.",
		}, []string{"biz_tag", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leaf_segment_load_duration_seconds",
			Help:    "Duration of segment allocation transactions, failed ones included.",
			Buckets: latencyBuckets,
		}, []string{"biz_tag"}),
		labelled: map[string]struct{}{},
	}
}

// Observe counts and times one load; it has the shape of
// [segment.Config.OnLoad].
func (l *LoadMetrics) Observe(e segment.LoadEvent) {
	result, label := "ok", e.BizTag
	if e.Err != nil {
		result = "error"
	}
	if !e.Known {
		label = ""
	}
	if label != "" {
		l.mu.Lock()
		l.labelled[label] = struct{}{}
		l.mu.Unlock()
	}
	l.loads.WithLabelValues(label, result).Inc()
	l.duration.WithLabelValues(label).Observe(e.Latency.Seconds())
}

func (l *LoadMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.loads, l.duration}
}

// prune deletes the series of tags not in live.
func (l *LoadMetrics) prune(live map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t := range l.labelled {
		if !live[t] {
			l.loads.DeletePartialMatch(prometheus.Labels{"biz_tag": t})
			l.duration.DeleteLabelValues(t)
			delete(l.labelled, t)
		}
	}
}

// segmentCollector turns segment.Generator.Stats into per-tag series, for
// the tags the generator serves (InitOK) only. The per-tag vectors written
// elsewhere (errors, loads) are collected here too, after their series of
// tags that left the store were deleted.
type segmentCollector struct {
	tr    *tracker
	errs  *tagErrors
	loads *LoadMetrics // nil when Deps.LoadMetrics is unset

	issued, step, minStep, curIdle, buffered, nextReady, loading,
	rate, runway, lastLoad, lastLatency, tags, rewound *prometheus.Desc
}

func newSegmentCollector(tr *tracker, errs *tagErrors, loads *LoadMetrics) *segmentCollector {
	tag := []string{"biz_tag"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &segmentCollector{
		tr: tr, errs: errs, loads: loads,
		issued:      d("leaf_segment_ids_issued_total", "IDs handed out since the tag's buffer was created.", tag),
		step:        d("leaf_segment_step_ids", "Current dynamic step of the tag, in IDs.", tag),
		minStep:     d("leaf_segment_min_step_ids", "Step column of leaf_alloc read by the last load (the minimum step), in IDs.", tag),
		curIdle:     d("leaf_segment_current_idle_ids", "IDs left in the current segment.", tag),
		buffered:    d("leaf_segment_buffered_ids", "IDs in memory that need no database round trip: the rest of the current segment plus the next one.", tag),
		nextReady:   d("leaf_segment_next_ready", "1 when the next segment is loaded and waiting, else 0.", tag),
		loading:     d("leaf_segment_loading", "1 while a segment load is in flight, else 0.", tag),
		rate:        d("leaf_segment_consumption_rate_ids_per_second", "IDs handed out per second over the last few seconds.", tag),
		runway:      d("leaf_segment_runway_seconds", "Seconds the buffered IDs last at the current rate if the database stops answering; +Inf when idle.", tag),
		lastLoad:    d("leaf_segment_last_load_timestamp_seconds", "Unix time of the last successful segment load.", tag),
		lastLatency: d("leaf_segment_last_load_duration_seconds", "Duration of the last successful segment load.", tag),
		tags:        d("leaf_segment_tags", "Biz tags known to the generator (rows of leaf_alloc).", nil),
		rewound:     d("leaf_segment_rewound", "1 while the tag refuses segments below its high-water mark (the database went back in time; fence it forward), else 0.", tag),
	}
}

// Describe sends the descriptors of the Stats series and of the vectors.
func (c *segmentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.issued, c.step, c.minStep, c.curIdle, c.buffered,
		c.nextReady, c.loading, c.rate, c.runway, c.lastLoad, c.lastLatency, c.tags, c.rewound} {
		ch <- d
	}
	c.errs.vec.Describe(ch)
	if c.loads != nil {
		for _, v := range c.loads.collectors() {
			v.Describe(ch)
		}
	}
}

// Collect takes a Stats snapshot and sends one series set per served tag.
func (c *segmentCollector) Collect(ch chan<- prometheus.Metric) {
	views := c.tr.sample()
	live := make(map[string]bool, len(views))
	for _, v := range views {
		live[v.BizTag] = true
		// A tag refused since the restart never loaded (InitOK false), but its row exists.
		if v.InitOK || v.Refusing {
			ch <- prometheus.MustNewConstMetric(c.rewound, prometheus.GaugeValue, b2f(v.Refusing), v.BizTag)
		}
		if !v.InitOK {
			continue
		}
		t := v.BizTag
		ch <- prometheus.MustNewConstMetric(c.issued, prometheus.CounterValue, float64(v.Issued), t)
		ch <- prometheus.MustNewConstMetric(c.step, prometheus.GaugeValue, float64(v.Step), t)
		ch <- prometheus.MustNewConstMetric(c.minStep, prometheus.GaugeValue, float64(v.MinStep), t)
		ch <- prometheus.MustNewConstMetric(c.curIdle, prometheus.GaugeValue, float64(v.Segments[v.Pos].Idle()), t)
		ch <- prometheus.MustNewConstMetric(c.buffered, prometheus.GaugeValue, float64(v.Remaining), t)
		ch <- prometheus.MustNewConstMetric(c.nextReady, prometheus.GaugeValue, b2f(v.NextReady), t)
		ch <- prometheus.MustNewConstMetric(c.loading, prometheus.GaugeValue, b2f(v.Loading), t)
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, v.Rate, t)
		ch <- prometheus.MustNewConstMetric(c.runway, prometheus.GaugeValue, v.Runway, t)
		if !v.LastLoad.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.lastLoad, prometheus.GaugeValue,
				float64(v.LastLoad.UnixNano())/1e9, t)
			ch <- prometheus.MustNewConstMetric(c.lastLatency, prometheus.GaugeValue, v.LastLoadLatency.Seconds(), t)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.tags, prometheus.GaugeValue, float64(len(views)))
	c.errs.prune(live)
	c.errs.vec.Collect(ch)
	if c.loads != nil {
		c.loads.prune(live)
		for _, v := range c.loads.collectors() {
			v.Collect(ch)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// snowflakeCollector turns snowflake.Generator.Stats into series, plus the
// age of the worker ID source's last heartbeat (lease renewal, ZooKeeper
// upload) when the source reports one.
type snowflakeCollector struct {
	gen       *snowflake.Generator
	source    string
	now       func() time.Time
	heartbeat func() time.Time // may be nil

	issued, backEvents, backWait, seqWaits, seqWait, hwStores,
	worker, lastIssued, headroom, heartbeatAge *prometheus.Desc
}

func newSnowflakeCollector(gen *snowflake.Generator, source string, now func() time.Time, heartbeat func() time.Time) *snowflakeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &snowflakeCollector{
		gen: gen, source: source, now: now, heartbeat: heartbeat,
		heartbeatAge: d("leaf_snowflake_source_heartbeat_age_seconds",
			"Seconds since the worker ID source last renewed its lease (sql) or uploaded its node (zookeeper)."),
		issued:     d("leaf_snowflake_ids_issued_total", "Snowflake IDs handed out since start."),
		backEvents: d("leaf_snowflake_clock_backward_events_total", "ID requests that found the clock behind the last issued ID."),
		backWait:   d("leaf_snowflake_clock_backward_wait_seconds_total", "Time spent waiting for the clock to catch up after it moved back."),
		seqWaits:   d("leaf_snowflake_sequence_waits_total", "Waits for the next millisecond after a millisecond's sequence was used up."),
		seqWait:    d("leaf_snowflake_sequence_wait_seconds_total", "Time spent in sequence-exhaustion waits."),
		hwStores:   d("leaf_snowflake_high_water_stores_total", "Stores of the time high-water mark by result (ok, error).", "result"),
		worker:     d("leaf_snowflake_worker_id", "The generator's worker ID; source names where it came from.", "source"),
		lastIssued: d("leaf_snowflake_last_issued_timestamp_seconds", "Unix time of the millisecond of the last issued ID."),
		headroom: d("leaf_snowflake_high_water_headroom_seconds",
			"Stored high-water mark minus now: how long IDs can be issued before the next store must succeed; <= 0 stalls issuing."),
	}
}

// Describe sends the descriptors of every snowflake series.
func (c *snowflakeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.issued, c.backEvents, c.backWait, c.seqWaits, c.seqWait,
		c.hwStores, c.worker, c.lastIssued, c.headroom, c.heartbeatAge} {
		ch <- d
	}
}

// Collect sends one snapshot of the generator's Stats.
func (c *snowflakeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.gen.Stats()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.issued, float64(s.Issued))
	counter(c.backEvents, float64(s.ClockBackwardEvents))
	counter(c.backWait, s.ClockBackwardWait.Seconds())
	counter(c.seqWaits, float64(s.SequenceWaits))
	counter(c.seqWait, s.SequenceWait.Seconds())
	counter(c.hwStores, float64(s.HighWaterStores), "ok")
	counter(c.hwStores, float64(s.HighWaterFailures), "error")
	gauge(c.worker, float64(s.WorkerID), c.source)
	if !s.LastIssued.IsZero() {
		gauge(c.lastIssued, float64(s.LastIssued.UnixMilli())/1e3)
	}
	if !s.HighWater.IsZero() {
		gauge(c.headroom, s.HighWater.Sub(c.now()).Seconds())
	}
	if c.heartbeat != nil {
		if t := c.heartbeat(); !t.IsZero() {
			gauge(c.heartbeatAge, c.now().Sub(t).Seconds())
		}
	}
}
