package api

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/segment"
)

// tagErrors counts failed segment requests by biz_tag and Leaf code. A tag
// gets its own series only while it is selected (tagSelection: with at most
// TagMetrics.AllMax tags, every served tag); every other failure, unknown
// tags included, is counted under an empty biz_tag, which Prometheus shows
// as no tag label at all. leaf_segment_all_errors_total{code} counts every
// failure.
type tagErrors struct {
	vec   *prometheus.CounterVec // biz_tag, code
	all   *prometheus.CounterVec // code: every failure, never pruned
	known func(tag string) bool
	sel   *tagSelection

	mu sync.Mutex // guards tags
	// tags are the biz_tag values that have children in vec, so that the
	// collector can delete those of tags that are no longer selected.
	tags map[string]struct{}
}

func newTagErrors(known func(string) bool, sel *tagSelection) *tagErrors {
	return &tagErrors{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaf_segment_errors_total",
			Help: "Failed /api/segment/get requests by Leaf code (-1 not initialised, -2 unknown tag, -3 no segment); biz_tag is empty for unknown tags and tags without series of their own.",
		}, []string{"biz_tag", "code"}),
		all: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaf_segment_all_errors_total",
			Help: "Failed /api/segment/get requests of every tag, known or not, by Leaf code.",
		}, []string{"code"}),
		known: known,
		sel:   sel,
		tags:  map[string]struct{}{},
	}
}

func (e *tagErrors) add(tag string, code int64) {
	c := strconv.FormatInt(code, 10)
	e.all.WithLabelValues(c).Inc()
	e.sel.mu.RLock()
	defer e.sel.mu.RUnlock()
	if code == -2 || !e.sel.has(tag, func() bool { return e.known(tag) }) {
		tag = ""
	}
	if tag != "" {
		e.mu.Lock()
		e.tags[tag] = struct{}{}
		e.mu.Unlock()
	}
	e.vec.WithLabelValues(tag, c).Inc()
}

// prune deletes the series of tags for which keep is false. The caller
// holds the selection's write lock.
func (e *tagErrors) prune(keep func(string) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for t := range e.tags {
		if !keep(t) {
			e.vec.DeletePartialMatch(prometheus.Labels{"biz_tag": t})
			delete(e.tags, t)
		}
	}
}

// LoadMetrics counts and times segment loads for /metrics:
// leaf_segment_loads_total{biz_tag,result} for tags with series of their
// own, and over every load leaf_segment_all_loads_total{result} and the
// histogram leaf_segment_load_duration_seconds (no biz_tag). Pass its
// Observe method as [segment.Config.OnLoad] and the value in
// [Deps.LoadMetrics], so that the handler registers the two metrics and
// deletes the series of tags that lost their own series. It is safe for
// concurrent use.
//
// A load is labelled with its biz_tag when the tag has series of its own
// ([TagMetrics]) and is known to exist in the store
// ([segment.LoadEvent.Known]: the allocation succeeded, or the tag was in
// the last tag list read, or a miss lookup found its row); every other load is counted under an empty
// biz_tag, so that probing random tags never creates series. A lookup of a tag the store does not have is
// not a load: the generator does not report it.
type LoadMetrics struct {
	loads    *prometheus.CounterVec // biz_tag, result
	all      *prometheus.CounterVec // result: every load, never pruned
	duration prometheus.Histogram
	// sel is the selection of the handler the metrics are registered with;
	// nil before that (every load then counts under biz_tag="").
	sel atomic.Pointer[tagSelection]

	mu sync.Mutex // guards labelled
	// labelled are the biz_tag values with children in loads.
	labelled map[string]struct{}
}

// NewLoadMetrics returns the two load metrics, unregistered: give the result
// to [NewHandler] in [Deps.LoadMetrics].
func NewLoadMetrics() *LoadMetrics {
	l := &LoadMetrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaf_segment_loads_total",
			Help: "Segment allocation transactions by result (ok, error); biz_tag is empty for tags without series of their own; a lookup of a name without a row is not counted.",
		}, []string{"biz_tag", "result"}),
		all: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaf_segment_all_loads_total",
			Help: "Segment allocation transactions of every tag by result (ok, error).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leaf_segment_load_duration_seconds",
			Help:    "Duration of segment allocation transactions of every tag, failed ones included.",
			Buckets: latencyBuckets,
		}),
		labelled: map[string]struct{}{},
	}
	l.all.WithLabelValues("ok")
	l.all.WithLabelValues("error")
	return l
}

// Observe counts and times one load; it has the shape of
// [segment.Config.OnLoad].
func (l *LoadMetrics) Observe(e segment.LoadEvent) {
	l.duration.Observe(e.Latency.Seconds())
	result := "ok"
	if e.Err != nil {
		result = "error"
	}
	l.all.WithLabelValues(result).Inc()
	sel := l.sel.Load()
	if sel == nil {
		l.loads.WithLabelValues("", result).Inc()
		return
	}
	sel.mu.RLock()
	defer sel.mu.RUnlock()
	label := e.BizTag
	if !sel.has(label, func() bool { return e.Known }) {
		label = ""
	}
	if label != "" {
		l.mu.Lock()
		l.labelled[label] = struct{}{}
		l.mu.Unlock()
	}
	l.loads.WithLabelValues(label, result).Inc()
}

func (l *LoadMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.loads, l.all, l.duration}
}

// prune deletes the series of tags for which keep is false. The caller
// holds the selection's write lock.
func (l *LoadMetrics) prune(keep func(string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t := range l.labelled {
		if !keep(t) {
			l.loads.DeletePartialMatch(prometheus.Labels{"biz_tag": t})
			delete(l.labelled, t)
		}
	}
}

// segmentCollector turns segment.Generator.Stats into series: per-tag
// series for the selected tags (tagSelection), totals over every tag
// without a biz_tag label. The per-tag vectors written elsewhere (errors,
// loads) are collected here too, after the series of tags no longer
// selected were deleted.
type segmentCollector struct {
	tr    *tracker
	sel   *tagSelection
	errs  *tagErrors
	loads *LoadMetrics // nil when Deps.LoadMetrics is unset

	// Per-tag.
	issued, step, minStep, curIdle, buffered, nextReady, loading,
	rate, runway, lastLoad, lastLatency, rewound *prometheus.Desc
	// Totals.
	tags, served, tagsLoading, notReady, refusing, backoff, selected,
	issuedAll, rateAll, bufferedAll, minRunway *prometheus.Desc
}

func newSegmentCollector(tr *tracker, sel *tagSelection, errs *tagErrors, loads *LoadMetrics) *segmentCollector {
	tag := []string{"biz_tag"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	// Until the first scrape chooses, a large fleet counts every event
	// under biz_tag="" rather than creating a series per tag.
	if cfg := sel.cfg; cfg.AllMax <= 0 || tagCount(tr.gen) > cfg.AllMax {
		sel.all = false
	}
	if loads != nil {
		loads.sel.Store(sel)
	}
	return &segmentCollector{
		tr: tr, sel: sel, errs: errs, loads: loads,
		issued:      d("leaf_segment_ids_issued_total", "IDs handed out since the tag's buffer was created (tags with series of their own).", tag),
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
		rewound:     d("leaf_segment_rewound", "1 while the tag refuses segments below its high-water mark (the database went back in time; fence it forward), else 0.", tag),

		tags:        d("leaf_segment_tags", "Biz tags known to the generator (rows of leaf_alloc).", nil),
		served:      d("leaf_segment_tags_served", "Biz tags with a loaded segment (served since the start).", nil),
		tagsLoading: d("leaf_segment_tags_loading", "Biz tags with a segment load in flight.", nil),
		notReady:    d("leaf_segment_tags_next_not_ready", "Served biz tags without a next segment waiting.", nil),
		refusing:    d("leaf_segment_tags_rewound", "Biz tags refusing segments below their high-water mark (see leaf_segment_rewound); always shown per tag.", nil),
		backoff:     d("leaf_segment_tags_load_backoff", "Biz tags whose last load failed and that wait before the next try.", nil),
		selected:    d("leaf_segment_tags_with_series", "Biz tags with series of their own (a biz_tag label) on this page.", nil),
		issuedAll:   d("leaf_segment_all_ids_issued_total", "IDs handed out over every tag since the start, as of the last snapshot.", nil),
		rateAll:     d("leaf_segment_all_consumption_rate_ids_per_second", "IDs handed out per second over every tag, over the last few seconds.", nil),
		bufferedAll: d("leaf_segment_all_buffered_ids", "IDs in memory over every tag.", nil),
		minRunway:   d("leaf_segment_min_runway_seconds", "Lowest runway of any served tag, in seconds; +Inf when none consumes IDs. The tag is among the per-tag series.", nil),
	}
}

// Describe sends the descriptors of the Stats series and of the vectors.
func (c *segmentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.issued, c.step, c.minStep, c.curIdle, c.buffered,
		c.nextReady, c.loading, c.rate, c.runway, c.lastLoad, c.lastLatency, c.rewound,
		c.tags, c.served, c.tagsLoading, c.notReady, c.refusing, c.backoff, c.selected,
		c.issuedAll, c.rateAll, c.bufferedAll, c.minRunway} {
		ch <- d
	}
	c.errs.vec.Describe(ch)
	c.errs.all.Describe(ch)
	if c.loads != nil {
		for _, v := range c.loads.collectors() {
			v.Describe(ch)
		}
	}
}

// Collect walks every tag once (tracker.visit: no sort, no copy per tag),
// folding it into the totals and the choice of the tags with series of
// their own, then sends those tags' series and the totals.
func (c *segmentCollector) Collect(ch chan<- prometheus.Metric) {
	c.sel.mu.RLock()
	prev := c.sel.tags
	c.sel.mu.RUnlock()
	pick := newChooser(c.sel.cfg, prev)
	tot := segmentTotals{minRunway: math.Inf(1)}
	now := c.tr.now()
	retired := c.tr.visit(func(st *segment.BufferStats, rate, runway float64) {
		tot.add(st, rate, runway, now)
		pick.add(st, rate, runway)
	})
	tot.issued += retired
	recs, all := pick.chosen()

	var keep func(string) bool
	var chosen map[string]struct{}
	if all {
		live := make(map[string]struct{}, len(recs))
		for i := range recs {
			live[recs[i].st.BizTag] = struct{}{}
		}
		keep = func(t string) bool { _, ok := live[t]; return ok }
	} else {
		chosen = make(map[string]struct{}, len(recs))
		for i := range recs {
			chosen[recs[i].st.BizTag] = struct{}{}
		}
		keep = func(t string) bool { _, ok := chosen[t]; return ok }
	}
	c.sel.mu.Lock()
	c.sel.all, c.sel.tags = all, chosen
	c.errs.prune(keep)
	if c.loads != nil {
		c.loads.prune(keep)
	}
	c.sel.mu.Unlock()

	for i := range recs {
		r := &recs[i]
		c.collectTag(ch, &bufferView{BufferStats: &r.st, Rate: r.rate, Runway: r.runway})
	}
	c.collectTotals(ch, &tot, len(recs))
	c.errs.vec.Collect(ch)
	c.errs.all.Collect(ch)
	if c.loads != nil {
		for _, v := range c.loads.collectors() {
			v.Collect(ch)
		}
	}
}

// collectTag sends the series of one selected tag.
func (c *segmentCollector) collectTag(ch chan<- prometheus.Metric, v *bufferView) {
	t := v.BizTag
	// A tag refused since the restart never loaded (InitOK false), but its row exists.
	if v.InitOK || v.Refusing {
		ch <- prometheus.MustNewConstMetric(c.rewound, prometheus.GaugeValue, b2f(v.Refusing), t)
	}
	if !v.InitOK {
		return
	}
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

// segmentTotals are the sums over every tag for the series without a
// biz_tag label, folded one tag at a time.
type segmentTotals struct {
	tags, served, loading, notReady, refusing, backoff int
	// issued includes, once the walk is done, the tracker's count of IDs
	// of buffers gone since the start (tracker.retired).
	issued, buffered int64
	rate             float64
	minRunway        float64 // +Inf when no served tag consumes IDs
}

// add folds in one tag; now is the scrape's time, for the backoff count.
func (t *segmentTotals) add(st *segment.BufferStats, rate, runway float64, now time.Time) {
	t.tags++
	if st.Refusing {
		t.refusing++
	}
	if st.RetryAt.After(now) {
		t.backoff++
	}
	if st.Loading {
		t.loading++
	}
	if !st.InitOK {
		return
	}
	t.served++
	if !st.NextReady {
		t.notReady++
	}
	t.issued += st.Issued
	t.buffered += st.Remaining
	t.rate += rate
	t.minRunway = min(t.minRunway, runway)
}

// collectTotals sends the series over every tag: counts of tags by state,
// the sums and the lowest runway.
func (c *segmentCollector) collectTotals(ch chan<- prometheus.Metric, t *segmentTotals, selected int) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(c.tags, float64(t.tags))
	gauge(c.served, float64(t.served))
	gauge(c.tagsLoading, float64(t.loading))
	gauge(c.notReady, float64(t.notReady))
	gauge(c.refusing, float64(t.refusing))
	gauge(c.backoff, float64(t.backoff))
	gauge(c.selected, float64(selected))
	ch <- prometheus.MustNewConstMetric(c.issuedAll, prometheus.CounterValue, float64(t.issued))
	gauge(c.rateAll, t.rate)
	gauge(c.bufferedAll, float64(t.buffered))
	gauge(c.minRunway, t.minRunway)
}

// tagCount is the number of tags gen knows.
func tagCount(gen *segment.Generator) int {
	n := 0
	gen.EachStat(func(*segment.BufferStats) bool { n++; return true })
	return n
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
