package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// benchHandlers returns two handlers over one generator (a SQLite store, a
// step large enough that loads are rare): without metrics and with them
// (middleware, per-tag collector, load recorder), so that the middleware's
// cost reads as the ratio of the two in one run.
func benchHandlers(b *testing.B) (bare, metered http.Handler) {
	b.Helper()
	ctx := context.Background()
	st, err := dsn.Open(ctx, "sqlite:"+b.TempDir()+"/leaf.db", true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Create(ctx, store.Row{BizTag: "bench", MaxID: 1, Step: 1_000_000}); err != nil {
		b.Fatal(err)
	}
	loads := api.NewLoadMetrics()
	gen, err := segment.New(ctx, st, segment.Config{OnLoad: loads.Observe})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gen.Close() })
	bare = api.NewHandler(api.Deps{Segment: gen, Store: st})
	metered = api.NewHandler(api.Deps{Segment: gen, Store: st, Registerer: prometheus.NewRegistry(), LoadMetrics: loads})
	return bare, metered
}

// discard is a ResponseWriter that keeps nothing, so that the in-process
// benchmark measures the handler and not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkSegmentGetInProcess calls the router directly, bare (the
// baseline) and with metrics. Without the network the middleware's share is
// as large as it can be. healthz is a handler that does nothing, so its
// difference is the middleware's own cost in ns.
func BenchmarkSegmentGetInProcess(b *testing.B) {
	bare, metered := benchHandlers(b)
	for _, path := range []string{"/api/segment/get/bench", "/healthz"} {
		for _, bc := range []struct {
			name string
			h    http.Handler
		}{{"bare", bare}, {"metrics", metered}} {
			b.Run(path[1:]+"/"+bc.name, func(b *testing.B) {
				b.ReportAllocs()
				req := httptest.NewRequest("GET", path, nil)
				w := &discard{h: http.Header{}}
				for b.Loop() {
					bc.h.ServeHTTP(w, req)
				}
			})
		}
	}
}

// BenchmarkHTTPSegmentGetMetrics is BenchmarkHTTPSegmentGet (bench_test.go)
// over loopback, bare and with metrics, in one run.
func BenchmarkHTTPSegmentGetMetrics(b *testing.B) {
	bare, metered := benchHandlers(b)
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"metrics", metered}} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httptest.NewServer(bc.h)
			defer srv.Close()
			benchHTTP(b, srv.URL+"/api/segment/get/bench")
		})
	}
}

// BenchmarkMetricsOverhead measures the middleware's cost on
// /api/segment/get robustly on a busy machine: it alternates batches of
// requests to the bare and the metered handler (swapping which goes first)
// and reports the median time per request of each and their ratio. The
// in-process case calls the router directly; the loopback case goes through
// HTTP over 127.0.0.1 as a client does.
func BenchmarkMetricsOverhead(b *testing.B) {
	bare, metered := benchHandlers(b)
	inProcess := func(path string) func(b *testing.B) {
		return func(b *testing.B) {
			call := func(h http.Handler) func() {
				req := httptest.NewRequest("GET", path, nil)
				w := &discard{h: http.Header{}}
				return func() { h.ServeHTTP(w, req) }
			}
			overhead(b, 2000, call(bare), call(metered), "bare", "metrics")
		}
	}
	b.Run("in-process", inProcess("/api/segment/get/bench"))
	// healthz does nothing: the difference is the middleware's own cost.
	b.Run("in-process-healthz", inProcess("/healthz"))
	b.Run("loopback", func(b *testing.B) {
		call := func(h http.Handler) func() { return loopbackGet(b, h) }
		overhead(b, 200, call(bare), call(metered), "bare", "metrics")
	})
}

// overhead runs batches of n calls of base and of with, alternately, and
// reports the median ns per call of each (as "<baseName>-ns/req" and
// "<withName>-ns/req") and with/base (as "ratio").
func overhead(b *testing.B, n int, base, with func(), baseName, withName string) {
	b.ReportAllocs()
	var tb, tw []float64
	batch := func(f func()) float64 {
		start := time.Now()
		for range n {
			f()
		}
		return float64(time.Since(start).Nanoseconds()) / float64(n)
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			tb = append(tb, batch(base))
			tw = append(tw, batch(with))
		} else {
			tw = append(tw, batch(with))
			tb = append(tb, batch(base))
		}
		i++
	}
	mb, mw := median(tb), median(tw)
	b.ReportMetric(mb, baseName+"-ns/req")
	b.ReportMetric(mw, withName+"-ns/req")
	b.ReportMetric(mw/mb, "ratio")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
