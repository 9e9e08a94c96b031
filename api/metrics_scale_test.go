package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store/dsn"
)

// warmTags returns a generator on a fresh PostgreSQL database with n tags
// (scale-000001…, DB step 1,000), each warmed by one Get from 16
// goroutines, as the bench harness's memory section does. Commits do not
// wait for the WAL flush: 100,000 loads take 10 to 60 s. A Get waits up to
// a minute for its load (the machine may be busy).
func warmTags(tb testing.TB, n int) (*segment.Generator, func(i int) string) {
	tb.Helper()
	ctx := context.Background()
	pg := dbtest.Postgres(tb)
	st, err := dsn.Open(ctx, pg, true) // migrates
	if err != nil {
		tb.Fatal(err)
	}
	st.Close()
	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`ALTER DATABASE ` + conn.Config().Database + ` SET synchronous_commit = off`,
		fmt.Sprintf(`INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time)
			SELECT 'scale-' || lpad(g::text, 6, '0'), 1, 1000, now() FROM generate_series(1, %d) g`, n),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			tb.Fatal(err)
		}
	}
	st, err = dsn.Open(ctx, pg, false)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	gen, err := segment.New(ctx, st, segment.Config{Logger: slog.New(slog.DiscardHandler), WaitTimeout: time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { gen.Close() })
	name := func(i int) string { return fmt.Sprintf("scale-%06d", i+1) }
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if _, err := gen.Get(ctx, name(int(i))); err != nil {
					tb.Errorf("Get(%s): %v", name(int(i)), err)
					return
				}
			}
		})
	}
	wg.Wait()
	return gen, name
}

// metricsHandler is a handler with metrics over gen, on a fresh registry.
func metricsHandler(gen *segment.Generator, tm api.TagMetrics) http.Handler {
	return api.NewHandler(api.Deps{Segment: gen, Registerer: prometheus.NewRegistry(), TagMetrics: tm})
}

// countingWriter keeps only the size of what is written.
type countingWriter struct {
	h http.Header
	n int
}

func (w *countingWriter) Header() http.Header         { return w.h }
func (w *countingWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *countingWriter) WriteHeader(int)             {}

// scrapeSize serves /metrics once in process and returns its size in bytes.
func scrapeSize(h http.Handler) int {
	w := &countingWriter{h: http.Header{}}
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.n
}

// consume takes IDs from every 10th tag, so that some tags have a rate.
func consume(tb testing.TB, gen *segment.Generator, n int, name func(int) string) {
	tb.Helper()
	for i := 0; i < n; i += 10 {
		for range 1 + i%7 {
			if _, err := gen.Get(context.Background(), name(i)); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// TestMetricsPromtool100k: /metrics of 100,000 warm tags, some of them
// consuming, has series of their own for at most 2 × 2 × Top tags (the
// default selection, with its hysteresis), is at most 5 MB (issue 13's
// target) and passes `promtool check metrics`.
func TestMetricsPromtool100k(t *testing.T) {
	if testing.Short() {
		t.Skip("warms 100,000 tags on PostgreSQL")
	}
	const n = 100_000
	gen, name := warmTags(t, n)
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Registerer: reg,
		TagMetrics: api.TagMetrics{Patterns: []string{"scale-00000?"}}}))
	defer srv.Close()
	do(t, "GET", srv.URL+"/metrics") // the first snapshot
	time.Sleep(300 * time.Millisecond)
	consume(t, gen, n, name)
	got := do(t, "GET", srv.URL+"/metrics")
	if got.status != 200 {
		t.Fatalf("GET /metrics = %d", got.status)
	}
	g := scrape(t, reg)
	if v, _ := value(t, g, "leaf_segment_tags_served"); v != n {
		t.Errorf("leaf_segment_tags_served = %v, want %d", v, n)
	}
	sel, _ := value(t, g, "leaf_segment_tags_with_series")
	if max := float64(4*api.DefaultMetricsTopTags + 9); sel < api.DefaultMetricsTopTags || sel > max {
		t.Errorf("leaf_segment_tags_with_series = %v, want between %d and %v", sel, api.DefaultMetricsTopTags, max)
	}
	for i := range 9 { // the pattern's tags
		if _, ok := value(t, g, "leaf_segment_ids_issued_total", "biz_tag", name(i)); !ok {
			t.Errorf("no leaf_segment_ids_issued_total for %s, which matches scale-00000?", name(i))
		}
	}
	if len(got.body) > 5<<20 {
		t.Errorf("/metrics is %d bytes at %d tags, want at most 5 MiB", len(got.body), n)
	}
	t.Logf("/metrics at %d tags: %d bytes, %d tags with series", n, len(got.body), int(sel))
	if c := strings.Count(got.body, "\n"); c > 20_000 {
		t.Errorf("/metrics has %d lines", c)
	}
	promtoolCheck(t, got.body)
}

// BenchmarkMetricsScrape serves /metrics in process (Stats snapshot, tag
// selection, Gather, text encoding) at 1,000 and 100,000 warm tags, every
// 10th consuming: with the default selection and with every tag given its
// series (TagMetrics.AllMax past the tag count: the layout before
// selection, less the per-tag load histograms); and, as the floor, one
// segment.Generator.Stats call alone. It reports the bytes of one scrape.
// Needs PostgreSQL.
func BenchmarkMetricsScrape(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		gen, name := warmTags(b, n)
		// The floor of any scrape: one Stats snapshot of every tag.
		b.Run(fmt.Sprintf("tags=%d/stats-only", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				gen.Stats()
			}
		})
		for _, bc := range []struct {
			name string
			tm   api.TagMetrics
		}{
			{"default", api.TagMetrics{AllMax: -1}},
			{"all-tags", api.TagMetrics{AllMax: 1 << 30}},
		} {
			b.Run(fmt.Sprintf("tags=%d/%s", n, bc.name), func(b *testing.B) {
				h := metricsHandler(gen, bc.tm)
				scrapeSize(h)
				time.Sleep(300 * time.Millisecond)
				consume(b, gen, n, name)
				b.ReportAllocs()
				size := 0
				for b.Loop() {
					size = scrapeSize(h)
				}
				b.ReportMetric(float64(size), "bytes/scrape")
			})
		}
	}
}
