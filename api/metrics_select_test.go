package api_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// manualClock is the handler's Now, moved by the test, so that rates and
// runways (the tracker's) are exact.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = time.Unix(1_800_000_000, 0).Add(d)
}

// scrape gathers reg once and returns the families as a Gatherer, so that
// every read of one phase sees the same scrape (each Gather chooses the
// tags anew).
func scrape(t *testing.T, reg prometheus.Gatherer) prometheus.Gatherer {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil })
}

// seriesSum is the sum of every series of a counter family, and the value
// of its series with labels (name, value pairs).
func seriesSum(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, _ := g.Gather()
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestMetricsTagSelection: past TagMetrics.AllMax tags, only the lowest
// runway, the highest rate, the pattern-matched tags get series; the
// totals cover every tag; the series of a tag that is no longer chosen go
// away while the other series' counters never go back.
func TestMetricsTagSelection(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, dbtest.SQLite(t),
		store.Row{BizTag: "hot", MaxID: 1, Step: 10_000},
		store.Row{BizTag: "low", MaxID: 1, Step: 20},
		store.Row{BizTag: "mid", MaxID: 1, Step: 1000},
		store.Row{BizTag: "cold", MaxID: 1, Step: 1000},
		store.Row{BizTag: "pin/a", MaxID: 1, Step: 1000})
	loads := api.NewLoadMetrics()
	gen, err := segment.New(ctx, st, segment.Config{OnLoad: loads.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	clock := &manualClock{}
	clock.Set(0)
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(api.NewHandler(api.Deps{
		Segment: gen, Store: st, Registerer: reg, LoadMetrics: loads, Now: clock.Now,
		// "pin/*" is a prefix: path.Match's * would stop at the slash.
		TagMetrics: api.TagMetrics{Top: 1, AllMax: -1, Patterns: []string{"pin/*"}},
	}))
	t.Cleanup(srv.Close)
	take := func(tag string, n int) {
		t.Helper()
		for range n {
			if _, err := gen.Get(ctx, tag); err != nil {
				t.Fatalf("Get(%s): %v", tag, err)
			}
		}
	}
	for _, tag := range []string{"hot", "low", "mid", "cold", "pin/a"} {
		take(tag, 1)
	}
	if got := do(t, "GET", srv.URL+"/api/segment/get/nope"); got.status != 500 {
		t.Fatalf("GET nope = %d", got.status)
	}
	waitIdle(t, gen)
	scrape(t, reg) // the first snapshot: rates count from here

	// invariants holds for every scrape: the totals cover every tag, the
	// counters of series that stay never go back.
	var lastOther, lastIssued float64
	invariants := func(g prometheus.Gatherer) {
		t.Helper()
		count, _ := value(t, g, "leaf_segment_load_duration_seconds")
		if sum := seriesSum(t, g, "leaf_segment_all_loads_total"); sum != count || count < 5 {
			t.Errorf("leaf_segment_all_loads_total = %v, want every load: %v (the histogram's count, at least one per tag)", sum, count)
		}
		// The per-tag series hold the loads since their tag was chosen.
		if sum := seriesSum(t, g, "leaf_segment_loads_total"); sum > count {
			t.Errorf("leaf_segment_loads_total summed over its series = %v, more than every load %v", sum, count)
		}
		if v, _ := value(t, g, "leaf_segment_all_errors_total", "code", "-2"); v != 1 {
			t.Errorf(`leaf_segment_all_errors_total{code="-2"} = %v, want 1`, v)
		}
		var issued int64
		for _, s := range gen.Stats() {
			issued += s.Issued
		}
		all, _ := value(t, g, "leaf_segment_all_ids_issued_total")
		if all != float64(issued) {
			t.Errorf("leaf_segment_all_ids_issued_total = %v, want the sum over every tag %d", all, issued)
		}
		if all < lastIssued {
			t.Errorf("leaf_segment_all_ids_issued_total went back: %v after %v", all, lastIssued)
		}
		other, _ := value(t, g, "leaf_segment_loads_total", "biz_tag", "", "result", "ok")
		if other < lastOther {
			t.Errorf(`leaf_segment_loads_total{biz_tag="",result="ok"} went back: %v after %v`, other, lastOther)
		}
		lastOther, lastIssued = other, all
		if v, _ := value(t, g, "leaf_segment_errors_total", "biz_tag", "", "code", "-2"); v != 1 {
			t.Errorf(`leaf_segment_errors_total{biz_tag="",code="-2"} = %v, want 1`, v)
		}
		if v, _ := value(t, g, "leaf_segment_tags_served"); v != 5 {
			t.Errorf("leaf_segment_tags_served = %v, want 5", v)
		}
	}
	wantTags := func(g prometheus.Gatherer, want ...string) {
		t.Helper()
		tags := tagsOf(t, g)
		for _, fam := range []string{"leaf_segment_ids_issued_total", "leaf_segment_runway_seconds",
			"leaf_segment_consumption_rate_ids_per_second", "leaf_segment_buffered_ids", "leaf_segment_rewound"} {
			if got := tags[fam]; !slices.Equal(got, want) {
				t.Errorf("%s has biz_tag %q, want exactly %q", fam, got, want)
			}
		}
		for _, fam := range []string{"leaf_segment_loads_total", "leaf_segment_errors_total"} {
			for _, tag := range tags[fam] {
				if !slices.Contains(want, tag) {
					t.Errorf("%s has a series for %q, which is not chosen (%q)", fam, tag, want)
				}
			}
		}
		if v, _ := value(t, g, "leaf_segment_tags_with_series"); v != float64(len(want)) {
			t.Errorf("leaf_segment_tags_with_series = %v, want %d", v, len(want))
		}
	}

	// Phase 1, one second later: hot has the highest rate (500/s), low the
	// lowest runway (about 22 to 42 IDs at 18/s), pin/a its pattern.
	take("hot", 500)
	take("low", 18)
	take("mid", 5)
	waitIdle(t, gen)
	clock.Set(time.Second)
	g := scrape(t, reg)
	wantTags(g, "hot", "low", "pin/a")
	invariants(g)
	lowRunway, _ := value(t, g, "leaf_segment_runway_seconds", "biz_tag", "low")
	if v, _ := value(t, g, "leaf_segment_min_runway_seconds"); v != lowRunway || v <= 0 || v > 3 {
		t.Errorf("leaf_segment_min_runway_seconds = %v, want low's runway %v (about 1.2 to 2.3 s)", v, lowRunway)
	}
	if v, _ := value(t, g, "leaf_segment_all_consumption_rate_ids_per_second"); v != 523 {
		t.Errorf("leaf_segment_all_consumption_rate_ids_per_second = %v, want 500 + 18 + 5", v)
	}
	// low is chosen now: its next loads count under its own label.
	take("low", 30)
	waitIdle(t, gen)
	g = scrape(t, reg)
	if v, _ := value(t, g, "leaf_segment_loads_total", "biz_tag", "low", "result", "ok"); v < 1 {
		t.Errorf(`leaf_segment_loads_total{biz_tag="low"} = %v after low was chosen and loaded, want >= 1`, v)
	}
	invariants(g)

	// Phase 2: hot and low stopped (their rate falls to 0 once the rate
	// window, 10 s, has a snapshot after their last ID), mid and cold
	// consume; mid has both the highest rate and the lowest runway. hot's
	// and low's series go, low's load counter included.
	clock.Set(31 * time.Second)
	invariants(scrape(t, reg))
	clock.Set(45 * time.Second)
	take("mid", 300)
	take("cold", 100)
	waitIdle(t, gen)
	g = scrape(t, reg)
	wantTags(g, "mid", "pin/a")
	invariants(g)
	if _, ok := value(t, g, "leaf_segment_loads_total", "biz_tag", "low", "result", "ok"); ok {
		t.Errorf(`leaf_segment_loads_total{biz_tag="low"} still there after low was dropped`)
	}
}

// waitIdle waits until no tag has a load in flight, so that the loads the
// test caused are counted before it reads them.
func waitIdle(t *testing.T, gen *segment.Generator) {
	t.Helper()
	waittest.For(t, 10*time.Second, "loads in flight to end", func() bool {
		for _, s := range gen.Stats() {
			if s.Loading {
				return false
			}
		}
		return true
	})
}
