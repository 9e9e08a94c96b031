package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// BenchmarkFormattedBatch compares, in one run and one handler, batches of
// 1,000 formatted IDs (GET /api/v1/segment/ord/formatted?count=1000,
// ORD{yyyyMMdd}{seq:10}) with batches of 1,000 plain IDs (GET
// /api/v1/segment/plain?count=1000), both on step 10^6 so loads are rare.
// The sub-benchmarks alternate blocks of 20 requests of each kind and report
// IDs/s of each and the ratio formatted ÷ plain (the median of the blocks'
// ratios), so both see the same machine state.
func BenchmarkFormattedBatch(b *testing.B) {
	ctx := context.Background()
	st, err := dsn.Open(ctx, "sqlite:"+b.TempDir()+"/leaf.db", true)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(ctx, store.Row{BizTag: "plain", MaxID: 1, Step: 1_000_000}); err != nil {
		b.Fatal(err)
	}
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	groups, err := group.New(ctx, gen, st, group.Config{
		PeriodsPath: filepath.Join(b.TempDir(), "group-periods.json")})
	if err != nil {
		b.Fatal(err)
	}
	defer groups.Close()
	if err := groups.Declare(ctx, store.Group{BizTag: "ord", Grp: "day", TimeZone: "UTC",
		Format: "ORD{yyyyMMdd}{seq:10}", Step: 1_000_000}); err != nil {
		b.Fatal(err)
	}
	h := api.NewHandler(api.Deps{Segment: gen, Store: st, Groups: groups})
	plain := httptestReq("/api/v1/segment/plain?count=1000")
	formatted := httptestReq("/api/v1/segment/ord/formatted?count=1000")
	serve := func(r *http.Request) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("%s = %d %s", r.URL, w.Code, w.Body)
		}
	}
	serve(plain) // first loads
	serve(formatted)
	const block = 20
	var tp, tf time.Duration
	var ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i += block {
		t0 := time.Now()
		for range block {
			serve(plain)
		}
		t1 := time.Now()
		for range block {
			serve(formatted)
		}
		t2 := time.Now()
		tp += t1.Sub(t0)
		tf += t2.Sub(t1)
		ratios = append(ratios, t1.Sub(t0).Seconds()/t2.Sub(t1).Seconds())
	}
	n := float64((b.N + block - 1) / block * block * 1000)
	b.ReportMetric(n/tp.Seconds(), "plain-IDs/s")
	b.ReportMetric(n/tf.Seconds(), "formatted-IDs/s")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "formatted÷plain")
}

func httptestReq(target string) *http.Request {
	return httptest.NewRequest(http.MethodGet, target, nil)
}

// BenchmarkLeafRouteWithGroups measures what grouped tags cost Leaf's route
// for a plain tag (the grouped-tag and period-row checks before the
// generator): blocks of 200 in-process requests of /api/segment/get/plain
// alternate between a handler without Groups and one with Groups (one tag
// declared), both on the same generator; the metric is the median of the
// blocks' ns/request ratios, with ÷ without.
func BenchmarkLeafRouteWithGroups(b *testing.B) {
	ctx := context.Background()
	st, err := dsn.Open(ctx, "sqlite:"+b.TempDir()+"/leaf.db", true)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(ctx, store.Row{BizTag: "plain", MaxID: 1, Step: 1_000_000}); err != nil {
		b.Fatal(err)
	}
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	groups, err := group.New(ctx, gen, st, group.Config{
		PeriodsPath: filepath.Join(b.TempDir(), "group-periods.json")})
	if err != nil {
		b.Fatal(err)
	}
	defer groups.Close()
	if err := groups.Declare(ctx, store.Group{BizTag: "ord", Grp: "day", TimeZone: "UTC",
		Format: "{yyyyMMdd}{seq:6}", Step: 1000}); err != nil {
		b.Fatal(err)
	}
	without := api.NewHandler(api.Deps{Segment: gen, Store: st})
	with := api.NewHandler(api.Deps{Segment: gen, Store: st, Groups: groups})
	r := httptestReq("/api/segment/get/plain")
	w := httptest.NewRecorder()
	run := func(h http.Handler, n int) time.Duration {
		t0 := time.Now()
		for range n {
			w.Body.Reset()
			h.ServeHTTP(w, r)
		}
		return time.Since(t0)
	}
	run(without, 100)
	if w.Code != http.StatusOK {
		b.Fatalf("plain = %d %s", w.Code, w.Body)
	}
	const block = 200
	var ratios []float64
	var tw, tg time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i += block {
		a := run(without, block)
		c := run(with, block)
		tw += a
		tg += c
		ratios = append(ratios, c.Seconds()/a.Seconds())
	}
	n := float64((b.N + block - 1) / block * block)
	b.ReportMetric(float64(tw.Nanoseconds())/n, "ns/req-without")
	b.ReportMetric(float64(tg.Nanoseconds())/n, "ns/req-with")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "with÷without")
}
