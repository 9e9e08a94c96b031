package segment_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// TestUnknownTag: a tag without a row answers -2 at once and is not cached.
func TestUnknownTag(t *testing.T) {
	t.Parallel()
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			g := newGen(t, db.Store, segment.Config{})
			start := time.Now()
			_, err := g.Get(context.Background(), "no-such-tag")
			if !errors.Is(err, segment.ErrTagNotFound) || segment.Code(err) != -2 {
				t.Fatalf("Get(%q) = %v, want ErrTagNotFound (-2)", "no-such-tag", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("Get of an unknown tag took %v", d)
			}
			if _, ok := statsOf(g, "no-such-tag"); ok {
				t.Errorf("unknown tag left in the cache")
			}
			if !g.Ready() {
				t.Errorf("Ready() = false, want true after the first tag list")
			}
		})
	}
}

// TestMissLookupRateLimited: probing random tags reaches the database only
// as often as the client's limiter allows; the tags looked up are -2, the
// others ErrMissLimited, -5 (not looked up, retry later).
func TestMissLookupRateLimited(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.Store}
	clk := clocktest.New(t0)
	g := newGen(t, cs, segment.Config{Clock: clk, MissLookupRate: 10, MissLookupBurst: 20})
	probe := func(round, lookups int) {
		for i := range 1000 {
			tag := fmt.Sprintf("probe-%d-%d", round, i)
			_, err := g.Get(context.Background(), tag)
			switch {
			case i < lookups && !errors.Is(err, segment.ErrTagNotFound):
				t.Fatalf("Get(%q) = %v, want ErrTagNotFound (-2) within the limit", tag, err)
			case i >= lookups && (!errors.Is(err, segment.ErrMissLimited) || segment.Code(err) != -5):
				t.Fatalf("Get(%q) = %v, want ErrMissLimited (-5) past the limit", tag, err)
			}
		}
	}
	rows0 := cs.RowsCalls.Load() // New's refresh
	probe(0, 20)
	if got := cs.RowsCalls.Load() - rows0; got != 20 {
		t.Fatalf("lookup queries for 1000 unknown tags asked one by one = %d, want 20 (the burst)", got)
	}
	clk.Add(time.Second)
	probe(1, 10)
	if got := cs.RowsCalls.Load() - rows0; got != 30 {
		t.Fatalf("lookup queries one second later = %d, want 30 (burst + 10/s)", got)
	}
	if got := cs.Allocs.Load(); got != 0 {
		t.Fatalf("Allocate calls = %d, want 0: a tag without a row is not allocated", got)
	}
	if got := len(g.Stats()); got != 0 {
		t.Fatalf("len(Stats()) = %d after probing, want 0", got)
	}
}

// TestMissLookupLimitSpent: once unknown tags have spent the client's
// miss-lookup limit, a row really inserted meanwhile answers ErrMissLimited
// (-5, retry later), not ErrTagNotFound, without reaching the database, and
// is served once the limiter has a token again.
func TestMissLookupLimitSpent(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.Store}
	clk := clocktest.New(t0)
	g := newGen(t, cs, segment.Config{Clock: clk, MissLookupRate: 1, MissLookupBurst: 2})
	ctx := context.Background()
	for i := range 2 {
		tag := fmt.Sprintf("typo-%d", i)
		if _, err := g.Get(ctx, tag); !errors.Is(err, segment.ErrTagNotFound) {
			t.Fatalf("Get(%q) = %v, want ErrTagNotFound", tag, err)
		}
	}
	db.Create(t, "new", 70, 100)
	rows := cs.RowsCalls.Load()
	_, err := g.Get(ctx, "new")
	if !errors.Is(err, segment.ErrMissLimited) || segment.Code(err) != -5 {
		t.Fatalf("Get(%q) with the limit spent = %v, want ErrMissLimited (-5)", "new", err)
	}
	if !strings.Contains(err.Error(), "lookups of unknown tags (1/s, burst 2) are spent") {
		t.Errorf("Get(%q) error %q does not say the client's lookup limit is spent", "new", err)
	}
	if _, err := g.Tag(ctx, "new"); !errors.Is(err, segment.ErrMissLimited) {
		t.Fatalf("Tag(%q) with the limit spent = %v, want ErrMissLimited", "new", err)
	}
	if got := cs.RowsCalls.Load() + cs.Allocs.Load(); got != rows {
		t.Fatalf("queries = %d, want %d: a refused lookup reaches no database", got, rows)
	}
	clk.Add(time.Second) // one token
	if id := mustGet(t, g, "new"); id != 70 {
		t.Fatalf("Get(%q) after the limiter refilled = %d, want 70", "new", id)
	}
}

// TestMissRemembered: a client looping on one missing tag costs one lookup
// per two seconds, so another new tag is still found at once; the missing
// tag is looked up again after two seconds, or at once after a refresh
// that lists it.
func TestMissRemembered(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.Store}
	clk := clocktest.New(t0)
	g := newGen(t, cs, segment.Config{Clock: clk, MissLookupRate: 1, MissLookupBurst: 2})
	ctx := context.Background()
	loop := func() {
		t.Helper()
		for range 1000 {
			if _, err := g.Get(ctx, "typo"); !errors.Is(err, segment.ErrTagNotFound) {
				t.Fatalf("Get(%q) = %v, want ErrTagNotFound", "typo", err)
			}
		}
	}
	rows0 := cs.RowsCalls.Load()
	loop()
	if got := cs.RowsCalls.Load() - rows0; got != 1 {
		t.Fatalf("lookup queries for 1000 Gets of one missing tag = %d, want 1", got)
	}
	db.Create(t, "new", 70, 100)
	if id := mustGet(t, g, "new"); id != 70 {
		t.Fatalf("Get(%q) after the loop = %d, want 70", "new", id)
	}

	// Remembered for two seconds, then looked up again (limiter: 1/s).
	db.Create(t, "typo", 500, 100)
	clk.Add(1900 * time.Millisecond)
	loop()
	clk.Add(100 * time.Millisecond)
	if id := mustGet(t, g, "typo"); id != 500 {
		t.Fatalf("Get(%q) two seconds after the miss = %d, want 500", "typo", id)
	}

	// A refresh that lists the tag forgets the miss at once.
	if _, err := g.Get(ctx, "later"); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("Get(%q) = %v, want ErrTagNotFound", "later", err)
	}
	db.Create(t, "later", 900, 100)
	if _, err := g.Get(ctx, "later"); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("Get(%q) right after the miss = %v, want ErrTagNotFound (remembered)", "later", err)
	}
	if err := g.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if id := mustGet(t, g, "later"); id != 900 {
		t.Fatalf("Get(%q) after a refresh = %d, want 900", "later", id)
	}
}

// TestConcurrentMissesShareOneLoad: many first Gets of a tag inserted while
// running allocate one segment between them (10 tags, 32 callers each).
func TestConcurrentMissesShareOneLoad(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.Store}
	g := newGen(t, cs, segment.Config{})
	const tags, n = 10, 32
	for i := range tags {
		tag := fmt.Sprintf("fresh-%d", i)
		db.Create(t, tag, 1, 1000)
		ids := make(chan int64, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				<-start
				id, err := g.Get(context.Background(), tag)
				if err != nil {
					t.Errorf("Get(%q) = %v, want an ID", tag, err)
				}
				ids <- id
			})
		}
		close(start)
		wg.Wait()
		close(ids)
		seen := map[int64]bool{}
		for id := range ids {
			if seen[id] || id < 1 || id > n {
				t.Fatalf("Get(%q) = %d: duplicated or outside [1, %d]", tag, id, n)
			}
			seen[id] = true
		}
		if got := cs.Allocs.Load(); got != int64(i+1) {
			t.Fatalf("Allocate calls after %d tags = %d, want one per tag, shared by %d concurrent misses", i+1, got, n)
		}
	}
}

// TestMissLookupsBatched: names that miss together are answered by one
// query: 64 concurrent first Gets of distinct names (32 real new tags, 32
// without a row, each from its own client) cost at most 2 lookup queries
// (the window may split them once), and each gets the right answer.
func TestMissLookupsBatched(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.Store}
	g := newGen(t, cs, segment.Config{})
	const n = 32
	for i := range n {
		db.Create(t, fmt.Sprintf("real-%d", i), 1, 100)
	}
	rows0 := cs.RowsCalls.Load()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Go(func() {
			<-start
			ctx := segment.WithClient(context.Background(), fmt.Sprintf("10.0.0.%d", i))
			tag := fmt.Sprintf("real-%d", i/2)
			if i%2 == 1 {
				tag = fmt.Sprintf("fake-%d", i/2)
			}
			id, err := g.Get(ctx, tag)
			switch {
			case i%2 == 0 && (err != nil || id != 1):
				t.Errorf("Get(%q) = %d, %v, want 1", tag, id, err)
			case i%2 == 1 && !errors.Is(err, segment.ErrTagNotFound):
				t.Errorf("Get(%q) = %d, %v, want ErrTagNotFound", tag, id, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := cs.RowsCalls.Load() - rows0; got < 1 || got > 2 {
		t.Errorf("lookup queries for %d concurrent misses = %d, want 1 or 2", 2*n, got)
	}
}

// TestMissLimitPerClient: a client that spent its miss-lookup limit on
// random names gets ErrMissLimited, while another client's new tag is
// looked up and served at once.
func TestMissLimitPerClient(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	clk := clocktest.New(t0)
	g := newGen(t, db.Store, segment.Config{Clock: clk, MissLookupRate: 1, MissLookupBurst: 5})
	flood := segment.WithClient(context.Background(), "192.0.2.1")
	other := segment.WithClient(context.Background(), "192.0.2.2")
	limited := 0
	for i := range 100 {
		_, err := g.Get(flood, fmt.Sprintf("random-%d", i))
		if errors.Is(err, segment.ErrMissLimited) {
			limited++
		} else if !errors.Is(err, segment.ErrTagNotFound) {
			t.Fatalf("Get(random-%d) = %v, want ErrTagNotFound or ErrMissLimited", i, err)
		}
	}
	if limited != 95 {
		t.Errorf("flooding client limited %d times of 100, want 95 (burst 5)", limited)
	}
	db.Create(t, "new", 7, 100)
	if id, err := g.Get(other, "new"); err != nil || id != 7 {
		t.Fatalf("other client's Get(%q) after the flood = %d, %v, want 7", "new", id, err)
	}
	if _, err := g.Get(flood, "new2"); !errors.Is(err, segment.ErrMissLimited) {
		t.Fatalf("flooding client's Get(%q) = %v, want ErrMissLimited", "new2", err)
	}
}

// blockedRows is a store whose Rows, after New's first, waits for release.
type blockedRows struct {
	segment.Store
	calls   atomic.Int64
	release chan struct{}
}

func (s *blockedRows) Rows(ctx context.Context) ([]store.Row, error) {
	if s.calls.Add(1) > 1 {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Rows(ctx)
}

// TestMissLookupWaitTimeout: a lookup the database does not answer ends
// with ErrNoSegment (-3) after Config.WaitTimeout, not after LoadTimeout.
func TestMissLookupWaitTimeout(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	bs := &blockedRows{Store: db.Store, release: make(chan struct{})}
	defer close(bs.release)
	g := newGen(t, bs, segment.Config{WaitTimeout: 50 * time.Millisecond, LoadTimeout: time.Hour})
	_, err := g.Get(context.Background(), "slow")
	if !errors.Is(err, segment.ErrNoSegment) || !strings.Contains(err.Error(), "not answered within the wait timeout 50ms") {
		t.Fatalf("Get(%q) with the lookup blocked = %v, want ErrNoSegment naming the wait timeout", "slow", err)
	}
}
