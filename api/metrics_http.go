package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
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

// httpMetrics is the request middleware's state.
type httpMetrics struct {
	requests *prometheus.CounterVec   // route, method, code
	duration *prometheus.HistogramVec // route, method
	// origin is the zero of the request timer: time.Since(origin) reads
	// only the monotonic clock, where time.Now reads the wall clock too
	// (BenchmarkMetricsOverhead measures the middleware's cost).
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
			*sw = statusWriter{}
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

	if m.segErrs != nil && code == http.StatusInternalServerError && route == segmentGetRoute && sw.leafCode != 0 {
		tag, err := PathKey(r, "key")
		if err != nil {
			tag = ""
		}
		m.segErrs.add(tag, sw.leafCode)
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

// statusWriter records the status code, and the Leaf result code the
// handler answered with (recordLeafCode), so that failed segment requests
// can be counted by code.
type statusWriter struct {
	http.ResponseWriter
	status int
	// leafCode is the code of the Leaf error body written (-1, -2 or -3);
	// 0 when none was.
	leafCode int64
	// digits is writeID's scratch space for the decimal ID (an int64 has
	// at most 20 characters), which would otherwise be allocated per
	// request.
	digits [20]byte
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
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recordLeafCode hands code, the Leaf result code of the error body the
// handler answers with on w, to the metrics middleware: to its statusWriter
// when w is one or wraps one (through Unwrap, the chain
// http.ResponseController follows). Without the middleware it does nothing.
func recordLeafCode(w http.ResponseWriter, code int64) {
	for {
		switch x := w.(type) {
		case *statusWriter:
			x.leafCode = code
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}
