package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store/dsn"
)

// metricsScaleSection: /metrics of one process serving N warm tags, with
// the default per-tag selection and with every tag given series of its own
// (the layout before selection, less its per-tag load histograms): bytes,
// scrape time over loopback HTTP and `promtool check metrics`, at 1,000 and
// 100,000 tags, against one Stats snapshot (the floor of any scrape).
func metricsScaleSection(t *testing.T, rep *report) {
	sizes := []int{1000, 100_000}
	scrapes := 7
	if *quick {
		sizes, scrapes = []int{1000, 10_000}, 3
	}
	promtool, _ := exec.LookPath("promtool")
	var b strings.Builder
	fmt.Fprintf(&b, "In one process: a `segment.Generator` on PostgreSQL with N tags (one `INSERT … SELECT generate_series`, DB step 1,000, "+
		"synchronous_commit off), each warmed by one `Get`, then every 10th tag takes 1 to 7 more IDs so that rates differ; "+
		"the handler (`api.NewHandler`, a fresh registry, no Go or process collectors) serves `/metrics` over loopback HTTP. "+
		"Time is the median (min–max) of %d scrapes, one after the other; `Stats` is one `segment.Generator.Stats` call alone, median of %d, "+
		"the floor of any scrape. Default: per-tag series for every tag while there are at most 200 tags, "+
		"else for the 50 lowest by runway, the 50 highest by rate and the tags refusing segments (issue 13 item 3); "+
		"all tags: `TagMetrics.AllMax` above N, i.e. the layout before selection less the per-tag load-duration histograms. "+
		"Target at 100,000 tags: ≤ 5 MB and ≤ 200 ms per scrape, promtool clean. The machine is shared: read the ratios.\n\n", scrapes, scrapes)
	b.WriteString("| tags | layout | **bytes** | series lines | tags with series | **scrape time** | Stats alone | scrape ÷ Stats | promtool |\n|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
	type key struct {
		n      int
		layout string
	}
	times, sizes2 := map[key]time.Duration{}, map[key]int{}
	for _, n := range sizes {
		gen := warmScaleTags(t, n)
		name := func(i int) string { return fmt.Sprintf("scale-%06d", i+1) }
		var st []time.Duration
		for range scrapes {
			start := time.Now()
			gen.Stats()
			st = append(st, time.Since(start))
		}
		statsMed := medianDur(st)
		for _, layout := range []struct {
			name string
			tm   api.TagMetrics
		}{{"default", api.TagMetrics{}}, {"all tags", api.TagMetrics{AllMax: 1 << 30}}} {
			reg := prometheus.NewRegistry()
			srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Registerer: reg, TagMetrics: layout.tm}))
			get := func() ([]byte, time.Duration) {
				start := time.Now()
				resp, err := http.Get(srv.URL + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("GET /metrics = %d, %v", resp.StatusCode, err)
				}
				return body, time.Since(start)
			}
			get() // the first snapshot: rates count from here
			time.Sleep(300 * time.Millisecond)
			for i := 0; i < n; i += 10 {
				for range 1 + i%7 {
					if _, err := gen.Get(t.Context(), name(i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			k := scrapes
			if layout.name == "all tags" && n > 10_000 {
				k = 3 // about 5 s and 70 MB a scrape
			}
			var ds []time.Duration
			var body []byte
			for range k {
				var d time.Duration
				body, d = get()
				ds = append(ds, d)
			}
			srv.Close()
			lines := 0
			for l := range bytes.SplitSeq(body, []byte("\n")) {
				if len(l) > 0 && l[0] != '#' {
					lines++
				}
			}
			withSeries := "–"
			for l := range bytes.SplitSeq(body, []byte("\n")) {
				if v, ok := bytes.CutPrefix(l, []byte("leaf_segment_tags_with_series ")); ok {
					withSeries = string(v)
				}
			}
			check := "not installed"
			if promtool != "" {
				cmd := exec.Command(promtool, "check", "metrics")
				cmd.Stdin = bytes.NewReader(body)
				out, err := cmd.CombinedOutput()
				check = "clean"
				if err != nil || len(bytes.TrimSpace(out)) > 0 {
					first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
					check = fmt.Sprintf("%v: %s", err, first)
				}
			}
			med := medianDur(ds)
			times[key{n, layout.name}], sizes2[key{n, layout.name}] = med, len(body)
			fmt.Fprintf(&b, "| %s | %s | **%s** | %s | %s | **%v** (%v–%v) | %v | %s | %s |\n", num(float64(n), 0), layout.name,
				num(float64(len(body)), 0), num(float64(lines), 0), withSeries, med.Round(100*time.Microsecond),
				slices.Min(ds).Round(100*time.Microsecond), slices.Max(ds).Round(100*time.Microsecond),
				statsMed.Round(100*time.Microsecond), ratio(float64(med), float64(statsMed)), check)
		}
		gen.Close()
	}
	lo, hi := sizes[0], sizes[len(sizes)-1]
	fmt.Fprintf(&b, "\nDefault layout, %s tags ÷ %s tags: bytes %s, scrape time %s. At %s tags, all tags ÷ default: bytes %s, scrape time %s.\n",
		num(float64(hi), 0), num(float64(lo), 0),
		ratio(float64(sizes2[key{hi, "default"}]), float64(sizes2[key{lo, "default"}])),
		ratio(float64(times[key{hi, "default"}]), float64(times[key{lo, "default"}])),
		num(float64(hi), 0),
		ratio(float64(sizes2[key{hi, "all tags"}]), float64(sizes2[key{hi, "default"}])),
		ratio(float64(times[key{hi, "all tags"}]), float64(times[key{hi, "default"}])))
	rep.add("/metrics at 100,000 tags", b.String())
}

// warmScaleTags returns a generator on a fresh PostgreSQL database with n
// tags scale-000001…, each warmed by one Get from 16 goroutines.
func warmScaleTags(t *testing.T, n int) *segment.Generator {
	t.Helper()
	ctx := t.Context()
	pg := dbtest.Postgres(t)
	_, conn := pgSetup(t, pg)
	for _, q := range []string{
		`ALTER DATABASE ` + conn.Config().Database + ` SET synchronous_commit = off`,
		fmt.Sprintf(`INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time)
			SELECT 'scale-' || lpad(g::text, 6, '0'), 1, 1000, now() FROM generate_series(1, %d) g`, n),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// A new pool, so that its sessions get synchronous_commit off.
	st, err := dsn.Open(ctx, pg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	gen, err := segment.New(ctx, st, segment.Config{Logger: discardLogger(), WaitTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				tag := fmt.Sprintf("scale-%06d", i+1)
				if _, err := gen.Get(context.Background(), tag); err != nil {
					t.Errorf("Get(%s): %v", tag, err)
					return
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("metricsscale: warmed %d tags in %v\n", n, time.Since(start).Round(time.Millisecond))
	return gen
}

func medianDur(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
