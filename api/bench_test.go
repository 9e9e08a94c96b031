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
	var n atomic.Int64
	r := chi.NewRouter()
	r.HandleFunc("/api/segment/get/{key}", func(w http.ResponseWriter, r *http.Request) {
		_ = chi.URLParam(r, "key")
		w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
		_, _ = w.Write(strconv.AppendInt(nil, n.Add(1), 10))
	})
	srv := httptest.NewServer(r)
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
