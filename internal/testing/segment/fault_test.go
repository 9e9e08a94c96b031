package segment_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/segtest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestDatabaseCut puts a real TCP proxy between the generator and
// PostgreSQL and cuts it: the buffered segments keep serving, then Get
// answers -3 (never an ID the database did not hand out), a refresh fails
// without dropping the tag, and the generator recovers by itself once the
// database is back.
func TestDatabaseCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := postgresDB.dsn(t)
	db := segtest.OpenDB(t, direct)
	db.Create(t, "cut", 1, 100)
	var px *faultproxy.Proxy
	proxied := segtest.ViaProxy(t, direct, func(upstream string) string {
		px = faultproxy.Start(t, upstream)
		return px.Addr()
	})
	st, err := dsn.Open(ctx, proxied, false)
	if err != nil {
		t.Fatalf("open via proxy: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	const wait = 300 * time.Millisecond
	g := segtest.NewGen(t, st, segment.Config{WaitTimeout: wait, LoadTimeout: time.Second,
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})

	seen := map[int64]bool{}
	for want := int64(1); want <= 20; want++ {
		if id := segtest.MustGet(t, g, "cut"); id != want {
			t.Fatalf("Get(%q) = %d, want %d", "cut", id, want)
		}
		seen[want] = true
	}
	segtest.WaitNextReady(t, g, "cut")
	maxBefore := db.MaxID(t, "cut") // 201: segments [1,101) and [101,201) are ours
	px.Cut()

	served := 0
	for {
		start := time.Now()
		id, err := g.Get(ctx, "cut")
		if err != nil {
			if !errors.Is(err, segment.ErrNoSegment) || segment.Code(err) != -3 {
				t.Fatalf("Get(%q) with the DB cut = %v, want ErrNoSegment (-3)", "cut", err)
			}
			if d := time.Since(start); d > wait+time.Second {
				t.Errorf("Get failed after %v, want within the wait timeout %v + slack", d, wait)
			}
			break
		}
		if id >= maxBefore || seen[id] {
			t.Fatalf("Get(%q) = %d with the DB cut; max_id was %d (or a duplicate)", "cut", id, maxBefore)
		}
		seen[id] = true
		served++
	}
	if want := int(maxBefore - 1 - 20); served != want {
		t.Errorf("served %d buffered IDs after the cut, want %d (rest of both segments)", served, want)
	}
	if err := g.Refresh(ctx); err == nil {
		t.Errorf("Refresh with the DB cut = nil, want an error")
	}
	if _, ok := segtest.StatsOf(g, "cut"); !ok {
		t.Fatalf("tag dropped by a failed refresh")
	}

	px.Restore(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		id, err := g.Get(ctx, "cut")
		if err == nil {
			if id < maxBefore || seen[id] {
				t.Fatalf("Get(%q) = %d after recovery, want a fresh ID >= %d", "cut", id, maxBefore)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery 15s after the DB came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWaitsThroughSlowDatabase: with 50 ms of latency added by a real proxy
// in front of PostgreSQL and a step of 10, callers keep running dry and wait
// for the load in flight; none fails, none spins, all IDs are unique.
func TestWaitsThroughSlowDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := postgresDB.dsn(t)
	db := segtest.OpenDB(t, direct)
	db.Create(t, "lag", 1, 10)
	var px *faultproxy.Proxy
	proxied := segtest.ViaProxy(t, direct, func(upstream string) string {
		px = faultproxy.Start(t, upstream)
		return px.Addr()
	})
	st, err := dsn.Open(ctx, proxied, false)
	if err != nil {
		t.Fatalf("open via proxy: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &segtest.CountingStore{Store: st}
	g := segtest.NewGen(t, cs, segment.Config{WaitTimeout: 5 * time.Second})
	segtest.MustGet(t, g, "lag")
	px.Delay(t, 50*time.Millisecond)

	const workers, each = 16, 100
	var mu sync.Mutex
	seen := map[int64]bool{1: true}
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range each {
				id, err := g.Get(ctx, "lag")
				if err != nil {
					t.Errorf("Get(%q) = %v, want an ID", "lag", err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("ID %d handed out twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d IDs through a 50ms link in %v with %d allocations", len(seen), time.Since(start), cs.Allocs.Load())
	if len(seen) != workers*each+1 {
		t.Fatalf("got %d IDs, want %d", len(seen), workers*each+1)
	}
}

// TestStartWithDatabaseDown: New succeeds with the database unreachable
// (Ready false, -1 for tags it cannot look up), and becomes ready by itself
// soon after the database is back, without waiting a full RefreshInterval.
func TestStartWithDatabaseDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := postgresDB.dsn(t)
	db := segtest.OpenDB(t, direct)
	db.Create(t, "early", 1, 100)
	var px *faultproxy.Proxy
	proxied := segtest.ViaProxy(t, direct, func(upstream string) string {
		px = faultproxy.Start(t, upstream)
		return px.Addr()
	})
	st, err := dsn.Open(ctx, proxied, false)
	if err != nil {
		t.Fatalf("open via proxy: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	px.Cut()
	g := segtest.NewGen(t, st, segment.Config{LoadTimeout: time.Second,
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	if g.Ready() {
		t.Fatal("Ready() = true with the database cut")
	}
	if _, err := g.Get(ctx, "early"); segment.Code(err) != -1 {
		t.Fatalf("Get(%q) with the database cut before any tag list = %v, want -1", "early", err)
	}
	px.Restore(t)
	waittest.For(t, 10*time.Second, "Ready after the database came back", g.Ready)
	if id := segtest.MustGet(t, g, "early"); id < 1 {
		t.Fatalf("Get(%q) = %d, want an ID", "early", id)
	}
}
