package api

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/segment"
)

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
