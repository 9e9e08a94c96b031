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
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
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

// TestMissLookupCost: the lookups of unknown names ask for those names
// only: 200 random names asked one by one cost 200 names in FindTags
// rounds and no read of the whole tag list (100 rows); each answers -2 and
// nothing is cached or allocated.
func TestMissLookupCost(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	for i := range 100 {
		db.Create(t, fmt.Sprintf("row-%d", i), 1, 10)
	}
	cs := &countingStore{Store: db.Store}
	g := newGen(t, cs, segment.Config{Clock: clocktest.New(t0)})
	rows0 := cs.RowsCalls.Load() // New's refresh
	for i := range 200 {
		tag := fmt.Sprintf("probe-%d", i)
		if _, err := g.Get(context.Background(), tag); !errors.Is(err, segment.ErrTagNotFound) || segment.Code(err) != -2 {
			t.Fatalf("Get(%q) = %v, want ErrTagNotFound (-2)", tag, err)
		}
	}
	if got := cs.RowsCalls.Load() - rows0; got != 0 {
		t.Errorf("tag-list reads for 200 unknown names = %d, want 0", got)
	}
	if got := cs.FindNames.Load(); got != 200 {
		t.Errorf("names looked up = %d, want 200 (one per distinct name)", got)
	}
	if got := cs.Allocs.Load(); got != 0 {
		t.Errorf("Allocate calls = %d, want 0: a tag without a row is not allocated", got)
	}
	if got := len(g.Stats()); got != 100 {
		t.Errorf("len(Stats()) = %d after probing, want the 100 rows", got)
	}
}

// blockedFind is a store whose FindTags waits for release (or its
// context), after entered receives.
type blockedFind struct {
	segment.Store
	entered chan struct{}
	release chan struct{}
}

func (s *blockedFind) FindTags(ctx context.Context, tags []string) (map[string]bool, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.FindTags(ctx, tags)
}

// TestMissQueueBound: while a lookup round hangs on the database, at most
// 8,192 names wait for the next one; a name past that is refused at once
// with ErrMissLimited (-5, retry later), a name already waiting joins its
// round, and once the database answers every waiting name gets its
// answer.
func TestMissQueueBound(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "real", 5, 100)
	bs := &blockedFind{Store: db.Store, entered: make(chan struct{}, 1), release: make(chan struct{})}
	g := newGen(t, bs, segment.Config{WaitTimeout: time.Minute, LoadTimeout: time.Minute})
	ctx := context.Background()
	errs := make(chan error, 2)
	go func() { _, err := g.Get(ctx, "first"); errs <- err }()
	<-bs.entered // the round of "first" is in flight
	// A cancelled context puts a name into the next round and returns at
	// once (the name stays asked).
	gone, cancel := context.WithCancel(ctx)
	cancel()
	const pending = 8192
	for i := range pending {
		if _, err := g.Get(gone, fmt.Sprintf("queued-%d", i)); !errors.Is(err, segment.ErrNoSegment) {
			t.Fatalf("Get(queued-%d) with a cancelled context = %v, want ErrNoSegment", i, err)
		}
	}
	_, err := g.Get(gone, "one-too-many")
	if !errors.Is(err, segment.ErrMissLimited) || segment.Code(err) != -5 || !strings.Contains(err.Error(), "8192 names wait") {
		t.Fatalf("Get past the bound = %v (code %d), want ErrMissLimited (-5) saying how many names wait", err, segment.Code(err))
	}
	go func() { _, err := g.Get(ctx, "queued-7"); errs <- err }() // joins its round
	close(bs.release)
	for range 2 {
		if err := <-errs; !errors.Is(err, segment.ErrTagNotFound) {
			t.Fatalf("waiting Get = %v, want ErrTagNotFound once the database answered", err)
		}
	}
	if id := mustGet(t, g, "real"); id != 5 {
		t.Fatalf("Get(%q) after the rounds = %d, want 5", "real", id)
	}
}

// TestMissRemembered: a client looping on one missing tag costs one lookup
// per second, so another new tag is still found at once; the missing tag
// is looked up again after a second, or at once after a refresh that lists
// it.
func TestMissRemembered(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.Store}
	clk := clocktest.New(t0)
	g := newGen(t, cs, segment.Config{Clock: clk})
	ctx := context.Background()
	loop := func() {
		t.Helper()
		for range 1000 {
			if _, err := g.Get(ctx, "typo"); !errors.Is(err, segment.ErrTagNotFound) {
				t.Fatalf("Get(%q) = %v, want ErrTagNotFound", "typo", err)
			}
		}
	}
	loop()
	if got := cs.FindCalls.Load(); got != 1 {
		t.Fatalf("lookup queries for 1000 Gets of one missing tag = %d, want 1", got)
	}
	db.Create(t, "new", 70, 100)
	if id := mustGet(t, g, "new"); id != 70 {
		t.Fatalf("Get(%q) after the loop = %d, want 70", "new", id)
	}

	// Remembered for a second, then looked up again.
	db.Create(t, "typo", 500, 100)
	clk.Add(900 * time.Millisecond)
	loop()
	clk.Add(100 * time.Millisecond)
	if id := mustGet(t, g, "typo"); id != 500 {
		t.Fatalf("Get(%q) a second after the miss = %d, want 500", "typo", id)
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
// without a row) cost at most 2 lookup rounds (the window may split them
// once), and each gets the right answer.
func TestMissLookupsBatched(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.Store}
	// The 32 first loads run at once on one SQLite file: a minute for them
	// on a loaded machine (the rounds are what is counted).
	g := newGen(t, cs, segment.Config{WaitTimeout: time.Minute})
	const n = 32
	for i := range n {
		db.Create(t, fmt.Sprintf("real-%d", i), 1, 100)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Go(func() {
			<-start
			ctx := context.Background()
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
	if got := cs.FindCalls.Load(); got < 1 || got > 2 {
		t.Errorf("lookup rounds for %d concurrent misses = %d, want 1 or 2", 2*n, got)
	}
}

// TestMissFloodFair: while 8 goroutines ask for random names as fast as
// they can (one client, one address: nothing tells them apart), a tag
// inserted meanwhile is served on its first request, never refused -5
// (the 1 s bound is checked end to end by TestMissFlood in
// internal/testing/faults; here the wait timeout is 10 s so that a loaded
// machine does not decide).
func TestMissFloodFair(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.Store}
	g := newGen(t, cs, segment.Config{WaitTimeout: 10 * time.Second, LoadTimeout: time.Minute})
	ctx, stop := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	var asked atomic.Int64
	for w := range 8 {
		flood.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				tag := fmt.Sprintf("random-%d-%d", w, i)
				if _, err := g.Get(ctx, tag); err != nil && !errors.Is(err, segment.ErrTagNotFound) && ctx.Err() == nil {
					t.Errorf("flood Get(%q) = %v, want ErrTagNotFound", tag, err)
				}
				asked.Add(1)
			}
		})
	}
	defer func() { stop(); flood.Wait() }()
	waittest.For(t, 10*time.Second, "the flood to run", func() bool { return asked.Load() >= 200 })
	for i := range 5 {
		tag := fmt.Sprintf("new-%d", i)
		db.Create(t, tag, 100*int64(i+1), 10)
		if id, err := g.Get(context.Background(), tag); err != nil || id != 100*int64(i+1) {
			t.Fatalf("Get(%q) during the flood = %d, %v, want %d", tag, id, err, 100*(i+1))
		}
	}
	stop()
	flood.Wait()
	if rounds, names := cs.FindCalls.Load(), cs.FindNames.Load(); rounds >= names {
		t.Errorf("%d lookup rounds for %d names: want rounds shared by the flood's names", rounds, names)
	}
}

// TestMissLookupWaitTimeout: a lookup the database does not answer ends
// with ErrNoSegment (-3) after Config.WaitTimeout, not after LoadTimeout.
func TestMissLookupWaitTimeout(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	bs := &blockedFind{Store: db.Store, entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(bs.release)
	g := newGen(t, bs, segment.Config{WaitTimeout: 50 * time.Millisecond, LoadTimeout: time.Hour})
	_, err := g.Get(context.Background(), "slow")
	if !errors.Is(err, segment.ErrNoSegment) || !strings.Contains(err.Error(), "not answered within the wait timeout 50ms") {
		t.Fatalf("Get(%q) with the lookup blocked = %v, want ErrNoSegment naming the wait timeout", "slow", err)
	}
}
