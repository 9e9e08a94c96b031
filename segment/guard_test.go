package segment_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// TestIDsPositive: a row whose max_id - step is below 1 never yields an ID
// <= 0; the segment is cut at 1, and one with no positive ID is refused.
func TestIDsPositive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		give        int64 // max_id before the first allocation (step 1000)
		want        int64 // first ID, 0 for an error
		wantAfterCu int64 // first ID of the next segment
	}{
		{name: "partly below 1", give: -500, want: 1, wantAfterCu: 500},
		{name: "ends at 1", give: -999, want: 0},
		{name: "wholly below 1", give: -5000, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, sqliteDB.dsn(t))
			db.Create(t, "neg", 1, 1000)
			db.Exec(t, "UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = 'neg'", tt.give)
			g := newGen(t, db.Store, segment.Config{Clock: clocktest.New(t0)})
			id, err := g.Get(context.Background(), "neg")
			if tt.want == 0 {
				if err == nil || !errors.Is(err, segment.ErrNoSegment) {
					t.Fatalf("Get(%q) = %d, %v, want ErrNoSegment", "neg", id, err)
				}
				return
			}
			if err != nil || id != tt.want {
				t.Fatalf("Get(%q) = %d, %v, want %d", "neg", id, err, tt.want)
			}
			for want := tt.want + 1; want <= tt.wantAfterCu; want++ {
				if id := mustGet(t, g, "neg"); id != want {
					t.Fatalf("Get(%q) = %d, want %d", "neg", id, want)
				}
			}
		})
	}
}

// TestRewoundStoreRefused: when max_id goes back (a restored backup), a
// segment below what was already handed out is refused, not served twice.
func TestRewoundStoreRefused(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "rw", 1, 100)
	g := newGen(t, db.Store, segment.Config{Clock: clocktest.New(t0)})
	seen := map[int64]bool{}
	for range 20 {
		seen[mustGet(t, g, "rw")] = true
	}
	waitNextReady(t, g, "rw") // [101, 201)
	db.Exec(t, "UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'rw'")
	for {
		id, err := g.Get(context.Background(), "rw")
		if err != nil {
			if !errors.Is(err, segment.ErrRewound) || segment.Code(err) != -3 {
				t.Fatalf("Get(%q) = %v, want ErrRewound as -3", "rw", err)
			}
			break
		}
		if seen[id] {
			t.Fatalf("Get(%q) = %d twice after the store went back", "rw", id)
		}
		seen[id] = true
	}
	if len(seen) != 200 {
		t.Fatalf("served %d IDs, want 200 (both segments)", len(seen))
	}
}

// TestNotInitialized: with the database down from the start, an unknown tag
// is -1 (nothing is known), not -2.
func TestNotInitialized(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "x", 1, 100)
	db.Store.Close()
	g := newGen(t, db.Store, segment.Config{})
	if g.Ready() {
		t.Fatal("Ready() = true with the database down")
	}
	for i := range 2 { // each looks up, and the lookup fails
		if _, err := g.Get(context.Background(), "x"); !errors.Is(err, segment.ErrNotInitialized) || segment.Code(err) != -1 {
			t.Fatalf("Get(%q) #%d = %v, want ErrNotInitialized (-1)", "x", i, err)
		}
	}
	if got := len(g.Stats()); got != 0 {
		t.Fatalf("len(Stats()) = %d, want 0: a failed lookup caches nothing", got)
	}
}

func TestNewConfigErrors(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	tests := []struct {
		name string
		give segment.Config
	}{
		{"negative wait", segment.Config{WaitTimeout: -1}},
		{"negative refresh", segment.Config{RefreshInterval: -1}},
		{"retry max below min", segment.Config{RetryMin: 10, RetryMax: 5}},
		{"shrink below grow", segment.Config{GrowWindow: 10, ShrinkWindow: 5}},
		{"negative max step", segment.Config{MaxStep: -1}},
	}
	for _, tt := range tests {
		if g, err := segment.New(context.Background(), db.Store, tt.give); err == nil {
			g.Close()
			t.Errorf("New(%s) = nil error, want one", tt.name)
		}
	}
	if _, err := segment.New(context.Background(), nil, segment.Config{}); err == nil {
		t.Errorf("New(nil store) = nil error, want one")
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give error
		want int64
	}{
		{nil, 0},
		{segment.ErrNotInitialized, -1},
		{segment.ErrTagNotFound, -2},
		{segment.ErrNoSegment, -3},
		{segment.ErrClosed, -3},
		{errors.Join(segment.ErrNoSegment, segment.ErrRewound), -3},
		{context.Canceled, -3},
	}
	for _, tt := range tests {
		if got := segment.Code(tt.give); got != tt.want {
			t.Errorf("Code(%v) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

// TestOverflowRefused: a row whose max_id + step would pass the int64
// maximum gives -3 with the store's overflow error, never a wrapped ID.
func TestOverflowRefused(t *testing.T) {
	t.Parallel()
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "big", 1, 10)
			db.Exec(t, "UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = 'big'", int64(math.MaxInt64-5))
			g := newGen(t, db.Store, segment.Config{})
			id, err := g.Get(context.Background(), "big")
			if !errors.Is(err, store.ErrOverflow) || segment.Code(err) != -3 {
				t.Fatalf("Get(%q) = %d, %v, want store.ErrOverflow as -3", "big", id, err)
			}
		})
	}
}

// TestOverflowFallsBackToDBStep: near the int64 end the dynamic step (doubled
// by quick loads) may no longer fit while the row's own step still does:
// the load falls back to the row's step and serves it, and only when that
// does not fit either is the tag refused. Without the fallback the tag was
// refused one segment early, for good.
func TestOverflowFallsBackToDBStep(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "edge", 1, 100)
	// Segments [-350, -250) and [-250, -150) below MaxInt64 at step 100; the
	// third load asks for the doubled step 200, which would pass the end.
	db.Exec(t, "UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = 'edge'", int64(math.MaxInt64-350))
	g := newGen(t, db.Store, segment.Config{})
	ctx := context.Background()
	seen := map[int64]bool{}
	for i := range 300 {
		id, err := g.Get(ctx, "edge")
		if err != nil {
			t.Fatalf("Get #%d = %v, want an ID (the row's step 100 still fits)", i+1, err)
		}
		if seen[id] || id < math.MaxInt64-350 || id >= math.MaxInt64-50 {
			t.Fatalf("Get #%d = %d: repeated or outside [MaxInt64-350, MaxInt64-50)", i+1, id)
		}
		seen[id] = true
	}
	if id, err := g.Get(ctx, "edge"); !errors.Is(err, store.ErrOverflow) {
		t.Errorf("Get past the last segment that fits = %d, %v, want store.ErrOverflow", id, err)
	}
	if got := db.MaxID(t, "edge"); got != math.MaxInt64-50 {
		t.Errorf("max_id = %d, want MaxInt64-50 (three segments, the refusals changed nothing)", got)
	}
}
