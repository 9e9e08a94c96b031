package segment_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
)

// TestBackoffSparesDatabase: while loads fail, neither the fast path past
// the prefetch mark nor exhausted callers start a new allocation each; they
// get -3 at once, and after the backoff one retry runs.
func TestBackoffSparesDatabase(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "flaky", 1, 100)
	cs := &countingStore{Store: db.Store}
	clk := clocktest.New(t0)
	g := newGen(t, cs, segment.Config{Clock: clk, RetryMin: time.Second, RetryMax: 4 * time.Second})
	mustGet(t, g, "flaky")
	db.Store.Close()
	for want := int64(2); want <= 100; want++ { // the 11th starts a load that fails
		if id := mustGet(t, g, "flaky"); id != want {
			t.Fatalf("Get(%q) = %d, want %d", "flaky", id, want)
		}
		if want == 11 {
			waittest.For(t, 10*time.Second, "the failed load", func() bool { st, _ := statsOf(g, "flaky"); return st.LoadFailures == 1 && !st.Loading })
		}
	}
	for range 100 {
		start := time.Now()
		if _, err := g.Get(context.Background(), "flaky"); !errors.Is(err, segment.ErrNoSegment) {
			t.Fatalf("Get(%q) = %v, want ErrNoSegment", "flaky", err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Fatalf("Get in backoff took %v, want an immediate answer", d)
		}
	}
	if got := cs.LoadCalls(); got != 2 {
		t.Fatalf("Allocate and MaxID calls = %d, want 2 (first load, one failed prefetch)", got)
	}
	clk.Add(time.Second) // the first backoff is RetryMin jittered down to at least half
	if _, err := g.Get(context.Background(), "flaky"); !errors.Is(err, segment.ErrNoSegment) {
		t.Fatalf("Get(%q) = %v, want ErrNoSegment", "flaky", err)
	}
	if got := cs.LoadCalls(); got != 3 {
		t.Fatalf("Allocate and MaxID calls after the backoff = %d, want 3", got)
	}
	st, _ := statsOf(g, "flaky")
	if st.LoadFailures != 2 || st.LastError == "" || st.RetryAt.IsZero() {
		t.Errorf("Stats = failures %d, last error %q, retry at %v; want 2, an error, a retry time", st.LoadFailures, st.LastError, st.RetryAt)
	}
}

// TestPrefetchRetriedWhileServing: a prefetch that failed is retried after
// its backoff by a later request that the current segment still serves
// (docs/contract.md §2, rule 6), not only once the segment runs out. The
// table is renamed away to make the load fail for real.
func TestPrefetchRetriedWhileServing(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "flaky", 1, 100)
	clk := clocktest.New(t0)
	g := newGen(t, db.Store, segment.Config{Clock: clk, RetryMin: time.Second, RetryMax: 4 * time.Second})
	mustGet(t, g, "flaky")
	db.Exec(t, "ALTER TABLE leaf_alloc RENAME TO leaf_alloc_away")
	for want := int64(2); want <= 20; want++ { // the 11th starts a load that fails
		if id := mustGet(t, g, "flaky"); id != want {
			t.Fatalf("Get(%q) = %d, want %d", "flaky", id, want)
		}
		if want == 11 {
			waittest.For(t, 10*time.Second, "the failed load", func() bool { st, _ := statsOf(g, "flaky"); return st.LoadFailures == 1 && !st.Loading })
		}
	}
	db.Exec(t, "ALTER TABLE leaf_alloc_away RENAME TO leaf_alloc")
	if st, _ := statsOf(g, "flaky"); st.LoadFailures != 1 || st.Loading || st.NextReady {
		t.Fatalf("Stats in backoff = failures %d, loading %v, next ready %v; want 1, false, false (no retry before the backoff)",
			st.LoadFailures, st.Loading, st.NextReady)
	}
	clk.Add(time.Second) // the first backoff is RetryMin jittered down to at least half
	if id := mustGet(t, g, "flaky"); id != 21 {
		t.Fatalf("Get(%q) = %d, want 21", "flaky", id)
	}
	if st := waitNextReady(t, g, "flaky"); st.LoadFailures != 1 {
		t.Errorf("Stats LoadFailures = %d after the retry, want 1", st.LoadFailures)
	}
}

// TestOnLoad: Config.OnLoad hears of every load, successful or not, with
// Known true for a tag the tag list had, a miss lookup found or an
// allocation found; a miss lookup (found, not found, or failed) is not a
// load.
func TestOnLoad(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "listed", 1, 100)
	db.Create(t, "listed2", 1, 100)
	var (
		mu     sync.Mutex
		events []segment.LoadEvent
	)
	onLoad := func(e segment.LoadEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	g := newGen(t, db.Store, segment.Config{OnLoad: onLoad})
	ctx := context.Background()
	mustGet(t, g, "listed")
	if _, err := g.Get(ctx, "missing"); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("Get(%q) = %v, want ErrTagNotFound", "missing", err)
	}
	db.Create(t, "probed", 1, 100)
	db.Create(t, "late", 1, 100)
	mustGet(t, g, "probed")
	// Found by a miss lookup, but its first load is refused (max_id + step
	// would pass int64): a failed load of a tag the store has.
	db.Create(t, "probedfull", 1, 100)
	db.Exec(t, "UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = 'probedfull'", int64(math.MaxInt64-10))
	if _, err := g.Get(ctx, "probedfull"); !errors.Is(err, segment.ErrNoSegment) {
		t.Fatalf("Get(%q) at the int64 limit = %v, want ErrNoSegment", "probedfull", err)
	}
	db.Store.Close()
	for _, tag := range []string{"listed2", "late"} {
		if _, err := g.Get(ctx, tag); !errors.Is(err, segment.ErrNoSegment) {
			t.Fatalf("Get(%q) with the store closed = %v, want ErrNoSegment", tag, err)
		}
	}
	tests := []struct {
		give      string
		wantErr   bool
		wantKnown bool
	}{
		{"listed", false, true},
		{"probed", false, true},
		{"probedfull", true, true},
		{"listed2", true, true},
		// "late": its miss lookup failed (the store closed): no load ran.
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != len(tests) {
		t.Fatalf("OnLoad got %d events %+v, want %d", len(events), events, len(tests))
	}
	for i, tt := range tests {
		e := events[i]
		if e.BizTag != tt.give || (e.Err != nil) != tt.wantErr || e.Known != tt.wantKnown || e.Latency <= 0 {
			t.Errorf("event %d = %+v, want biz tag %q, error %v, known %v, a latency", i, e, tt.give, tt.wantErr, tt.wantKnown)
		}
	}
}

// TestMarkedLoadOneStatement: a tag with a high-water mark is loaded by the
// allocation alone, its mark checked in the allocating UPDATE: no read of
// max_id before it, whether the load is accepted or refused as rewound, and
// a refused load moves max_id nowhere.
func TestMarkedLoadOneStatement(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "marked", 1, 10)
	cs := &countingStore{Store: db.Store}
	cfg := fastRetry
	cfg.Marks = segment.NewFileMarks(filepath.Join(t.TempDir(), "marks.json"))
	cfg.GrowWindow, cfg.ShrinkWindow = time.Nanosecond, time.Hour // step stays 10
	g := newGen(t, cs, cfg)
	for want := int64(1); want <= 35; want++ {
		if id := mustGet(t, g, "marked"); id != want {
			t.Fatalf("Get(%q) = %d, want %d", "marked", id, want)
		}
	}
	st := waitNextReady(t, g, "marked") // [31, 41) and [41, 51): five loads
	if got := cs.Allocs.Load(); got != 5 || cs.MaxIDs.Load() != 0 {
		t.Fatalf("after five loads: %d Allocate and %d MaxID calls, want 5 and 0", got, cs.MaxIDs.Load())
	}
	db.Exec(t, "UPDATE leaf_alloc SET max_id = 11 WHERE biz_tag = 'marked'")
	var err error
	for err == nil {
		_, err = g.Get(context.Background(), "marked")
	}
	if !errors.Is(err, segment.ErrRewound) {
		t.Fatalf("Get(%q) after the rewind = %v, want ErrRewound", "marked", err)
	}
	if st, _ = statsOf(g, "marked"); !st.Refusing || st.HighWater != 51 {
		t.Fatalf("Stats: Refusing=%v HighWater=%d, want true, 51", st.Refusing, st.HighWater)
	}
	if got := db.MaxID(t, "marked"); got != 11 {
		t.Errorf("max_id after the refusal = %d, want 11 (nothing allocated)", got)
	}
	if got := cs.MaxIDs.Load(); got != 0 {
		t.Errorf("MaxID calls = %d, want 0: the mark is checked by the allocation", got)
	}
}
