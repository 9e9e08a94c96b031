package api

// latencyBuckets are the HTTP and load latency buckets, in seconds: 100 µs
// (an ID from memory over loopback) to 10 s (a load that hit its timeout).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// registerMetrics registers leaf-go's collectors on d.Registerer: the HTTP
// request metrics (metrics_http.go), the segment collector with the request
// errors and d.LoadMetrics when tr is not nil (metrics_segment.go; which
// tags get series of their own: d.TagMetrics, metrics_select.go),
// leaf_store_retries_total when d.Store counts its retries
// (metrics_store.go), and the snowflake collector when d.SnowflakeSlot is not
// nil (metrics_snowflake.go). tr is the segment tracker, nil when segment
// mode is off. It returns the request middleware's state, nil without a
// Registerer. It panics when the registerer refuses the collectors, as
// prometheus.MustRegister does: that is a wiring mistake, such as two
// handlers on one registry.
func registerMetrics(d Deps, tr *tracker) *httpMetrics {
	reg := d.Registerer
	if reg == nil {
		return nil
	}
	m := newHTTPMetrics()
	reg.MustRegister(m.collectors()...)
	if tr != nil {
		sel := newTagSelection(d.TagMetrics)
		m.segErrs = newTagErrors(tr.isServed, sel)
		reg.MustRegister(newSegmentCollector(tr, sel, m.segErrs, d.LoadMetrics))
	}
	if d.Store != nil {
		reg.MustRegister(newStoreRetryCollector(d.Store))
	}
	if d.SnowflakeSlot != nil {
		c := newSnowflakeCollector(d.SnowflakeSlot, d.Now)
		c.workerRange = d.WorkerRange
		reg.MustRegister(c)
	}
	return m
}
