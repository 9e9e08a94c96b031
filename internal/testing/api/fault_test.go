package api_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestMetricsDatabaseCut cuts PostgreSQL under a served tag: the runway
// falls, next ready drops to 0, failed loads and -3 answers are counted for
// the tag.
func TestMetricsDatabaseCut(t *testing.T) {
	direct := dbtest.Postgres(t)
	px := faultproxy.Start(t, "127.0.0.1:5432")
	proxied := strings.Replace(direct, "127.0.0.1:5432", px.Addr(), 1)
	if proxied == direct {
		t.Fatalf("cannot route %s through the proxy", dsn.Redact(direct))
	}
	s := newOpsServer(t, proxied, segment.Config{WaitTimeout: 200 * time.Millisecond, LoadTimeout: time.Second,
		RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond},
		store.Row{BizTag: "cut", MaxID: 1, Step: 200})
	take := func() answer { return s.get(t, "/api/segment/get/cut") }
	for range 50 {
		if got := take(); got.status != 200 {
			t.Fatalf("GET cut = %d %s", got.status, got.body)
		}
	}
	waittest.For(t, 10*time.Second, "the next segment", func() bool {
		v, _ := value(t, s.reg, "leaf_segment_next_ready", "biz_tag", "cut")
		return v == 1
	})
	s.get(t, "/api/v1/segment/buffers") // a rate sample
	time.Sleep(300 * time.Millisecond)
	for range 50 {
		take()
	}
	before, _ := value(t, s.reg, "leaf_segment_runway_seconds", "biz_tag", "cut")
	bufBefore, _ := value(t, s.reg, "leaf_segment_buffered_ids", "biz_tag", "cut")

	px.Cut()
	var failed bool
	for range 1000 {
		if got := take(); got.status == 500 {
			if !strings.Contains(got.body, "id=-3") {
				t.Fatalf("while cut: %d %s, want -3", got.status, got.body)
			}
			failed = true
			break
		}
	}
	if !failed {
		t.Fatal("served 1000 IDs with the database cut; the buffers hold 400")
	}
	after, _ := value(t, s.reg, "leaf_segment_runway_seconds", "biz_tag", "cut")
	bufAfter, _ := value(t, s.reg, "leaf_segment_buffered_ids", "biz_tag", "cut")
	if !(after < before) || bufAfter != 0 {
		t.Errorf("runway %v -> %v s, buffered %v -> %v IDs; want the runway to fall and the buffer to empty", before, after, bufBefore, bufAfter)
	}
	if v, ok := value(t, s.reg, "leaf_segment_next_ready", "biz_tag", "cut"); !ok || v != 0 {
		t.Errorf("leaf_segment_next_ready{cut} = %v (found %v), want 0", v, ok)
	}
	if v, _ := value(t, s.reg, "leaf_segment_loads_total", "biz_tag", "cut", "result", "error"); v < 1 {
		t.Errorf("leaf_segment_loads_total{cut,error} = %v, want >= 1", v)
	}
	if v, _ := value(t, s.reg, "leaf_segment_errors_total", "biz_tag", "cut", "code", "-3"); v < 1 {
		t.Errorf("leaf_segment_errors_total{cut,-3} = %v, want >= 1", v)
	}
	// A probe of an unknown tag while the database is down stays untagged.
	s.get(t, "/api/segment/get/probe-while-down")
	for fam, tags := range tagsOf(t, s.reg) {
		if !slices.Equal(tags, []string{"cut"}) {
			t.Errorf("%s has biz_tag %q, want only cut", fam, tags)
		}
	}

	px.Restore(t)
	waittest.For(t, 10*time.Second, "recovery", func() bool { return take().status == 200 })
}
