package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// benchHTTP drives url over loopback with keep-alive connections from
// GOMAXPROCS goroutines and reports requests per second.
func benchHTTP(b *testing.B, url string) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("GET %s = %d", url, resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkHTTPBareChi is the baseline for BenchmarkHTTPSegmentGet: a chi
// router whose handler returns an atomic counter as text.
func BenchmarkHTTPBareChi(b *testing.B) {
	srv := httptest.NewServer(bareChi())
	defer srv.Close()
	benchHTTP(b, srv.URL+"/api/segment/get/bench")
}

// BenchmarkHTTPSegmentGet is /api/segment/get/{key} through the full
// handler, with a step large enough that loads are rare.
func BenchmarkHTTPSegmentGet(b *testing.B) {
	ctx := context.Background()
	st, err := dsn.Open(ctx, "sqlite:"+b.TempDir()+"/leaf.db", true)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(ctx, store.Row{BizTag: "bench", MaxID: 1, Step: 1_000_000}); err != nil {
		b.Fatal(err)
	}
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st}))
	defer srv.Close()
	benchHTTP(b, srv.URL+"/api/segment/get/bench")
}

// bareChi is the baseline handler of the benchmarks: a chi router whose
// handler returns an atomic counter as text, as Leaf's route would.
func bareChi() http.Handler {
	var n atomic.Int64
	r := chi.NewRouter()
	r.HandleFunc("/api/segment/get/{key}", func(w http.ResponseWriter, r *http.Request) {
		_ = chi.URLParam(r, "key")
		w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
		_, _ = w.Write(strconv.AppendInt(nil, n.Add(1), 10))
	})
	return r
}

// BenchmarkBareChiOverhead is BenchmarkHTTPSegmentGet against
// BenchmarkHTTPBareChi, robust to a busy machine: it alternates batches of
// requests to a bare chi handler and to leaf-go's handler and reports the
// median ns per request of each and their ratio (leaf-go ÷ bare, lower is
// better; the HTTP target, ≥ 0.9× the bare handler's rate, is a ratio
// ≤ 1.11). The in-process cases call the routers' ServeHTTP directly
// (leaf-go without and with metrics); the loopback case is one client over
// 127.0.0.1 (leaf-go with metrics, as in production).
func BenchmarkBareChiOverhead(b *testing.B) {
	bare, metered := benchHandlers(b)
	call := func(h http.Handler) func() {
		req := httptest.NewRequest("GET", "/api/segment/get/bench", nil)
		w := &discard{h: http.Header{}}
		return func() { h.ServeHTTP(w, req) }
	}
	b.Run("in-process", func(b *testing.B) { overhead(b, 2000, call(bareChi()), call(bare), "chi", "leaf") })
	b.Run("in-process-metrics", func(b *testing.B) { overhead(b, 2000, call(bareChi()), call(metered), "chi", "leaf") })
	b.Run("loopback", func(b *testing.B) {
		get := func(h http.Handler) func() { return loopbackGet(b, h) }
		overhead(b, 200, get(bareChi()), get(metered), "chi", "leaf")
	})
}

// loopbackGet serves h on a loopback httptest server for the rest of the
// benchmark and returns a call that GETs /api/segment/get/bench from it once,
// failing the benchmark on anything but a 200.
func loopbackGet(b *testing.B, h http.Handler) func() {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	url := srv.URL + "/api/segment/get/bench"
	return func() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET %s = %d", url, resp.StatusCode)
		}
	}
}
