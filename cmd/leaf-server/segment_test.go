package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/faultproxy"
	"github.com/leaf-go/leaf/store"
)

// TestLoadFailureMetricsKeepTag wires segment mode and the handler as run
// does (startSegment), cuts the database, and checks that failed loads of
// tags in leaf_alloc are counted under their biz_tag: the first load of a
// tag the tag list read, and the prefetch of a tag already serving. No load
// is counted under an empty biz_tag.
func TestLoadFailureMetricsKeepTag(t *testing.T) {
	direct := dbtest.Postgres(t)
	px := faultproxy.Start(t, "127.0.0.1:5432")
	proxied := strings.Replace(direct, "127.0.0.1:5432", px.Addr(), 1)
	if proxied == direct {
		t.Fatalf("cannot route the test database through the proxy")
	}
	st := openStore(t, proxied)
	ctx := context.Background()
	for _, tag := range []string{"served", "listed"} {
		if err := st.Create(ctx, store.Row{BizTag: tag, MaxID: 1, Step: 100}); err != nil {
			t.Fatalf("Create(%q): %v", tag, err)
		}
	}
	cfg := DefaultConfig()
	cfg.SegmentDSN, cfg.DataDir, cfg.DemoTag = proxied, t.TempDir(), false
	cfg.WaitTimeout = 200 * time.Millisecond
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	reg := prometheus.NewRegistry()
	deps := api.Deps{Logger: log, Registerer: reg}
	gen, err := startSegment(ctx, cfg, st, log, &deps)
	if err != nil {
		t.Fatalf("startSegment: %v", err)
	}
	t.Cleanup(func() { gen.Close() })
	h := api.NewHandler(deps)
	get := func(tag string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/segment/get/"+tag, nil))
		return rec.Code
	}
	loads := func(tag, result string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}
		var sum float64
		for _, mf := range mfs {
			if mf.GetName() != "leaf_segment_loads_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["biz_tag"] == tag && labels["result"] == result {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}

	if code := get("served"); code != http.StatusOK {
		t.Fatalf("GET served = %d, want 200", code)
	}
	px.Cut()
	if code := get("listed"); code != http.StatusInternalServerError {
		t.Fatalf("GET listed with the database cut = %d, want 500", code)
	}
	// Past 10% of served's segment the prefetch starts, and fails.
	for range 20 {
		if code := get("served"); code != http.StatusOK {
			t.Fatalf("GET served from its segment = %d, want 200", code)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for loads("served", "error") < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, tag := range []string{"listed", "served"} {
		if v := loads(tag, "error"); v < 1 {
			t.Errorf("leaf_segment_loads_total{biz_tag=%q,result=\"error\"} = %v, want >= 1", tag, v)
		}
	}
	if v := loads("", "error"); v != 0 {
		t.Errorf("leaf_segment_loads_total{biz_tag=\"\",result=\"error\"} = %v, want 0 (every failed load was of a listed tag)", v)
	}
}
