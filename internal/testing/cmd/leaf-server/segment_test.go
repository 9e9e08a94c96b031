package leafserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/store"
)

// TestLoadFailureMetricsKeepTag runs segment mode and the handler as a user
// does (the real leaf-server binary, wired by run and startSegment), cuts the
// database, and checks that failed loads of tags in leaf_alloc are counted
// under their biz_tag: the first load of a tag the tag list read, and the
// prefetch of a tag already serving. No load is counted under an empty
// biz_tag.
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
	p := startServer(t, t.TempDir(), "--segment-dsn", proxied, "--demo-tag=false", "--wait-timeout", "200ms")
	get := func(tag string) int {
		code, body, err := p.get(ctx, "/api/segment/get/"+tag)
		if err != nil {
			t.Fatalf("GET %s: %v (%s)", tag, err, body)
		}
		return code
	}
	loads := func(tag, result string) float64 {
		code, body, err := p.get(ctx, "/metrics")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /metrics = %d, %v", code, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			t.Fatalf("parse /metrics: %v", err)
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
