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
	"github.com/leaf-go/leaf/internal/faultproxy"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestWorkedExample is SPEC §6 on every store: row (leaf-segment-test, 1,
// 2000) gives 1 first, prefetches once more than 200 IDs are used, gives
// 2001 as the 2001st ID, and then follows Leaf's dynamic step.
func TestWorkedExample(t *testing.T) {
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			const tag = "leaf-segment-test"
			db.create(t, tag, 1, 2000)
			clk := clocktest.New(t0)
			g := newGen(t, db.st, segment.Config{Clock: clk})

			next := int64(1)
			take := func(n int64) {
				t.Helper()
				for range n {
					if id := mustGet(t, g, tag); id != next {
						t.Fatalf("Get(%q) = %d, want %d", tag, id, next)
					}
					next++
				}
			}

			take(200)
			if st, _ := statsOf(g, tag); st.Loading || st.NextReady {
				t.Fatalf("after 200 IDs: Loading=%v NextReady=%v, want no load (idle 1800 = 0.9*step)", st.Loading, st.NextReady)
			}
			if got := db.maxID(t, tag); got != 2001 {
				t.Fatalf("max_id after 200 IDs = %d, want 2001 (no load yet)", got)
			}
			take(1) // the 201st: idle 1799 < 1800 starts the load
			st := waitNextReady(t, g, tag)
			if got := db.maxID(t, tag); got != 4001 {
				t.Fatalf("max_id after the first prefetch = %d, want 4001", got)
			}
			if st.Step != 2000 || st.MinStep != 2000 {
				t.Fatalf("first prefetch Step, MinStep = %d, %d, want 2000, 2000 (the DB step)", st.Step, st.MinStep)
			}
			take(2000 - 201)
			if id := mustGet(t, g, tag); id != 2001 {
				t.Fatalf("2001st Get(%q) = %d, want 2001", tag, id)
			}
			next++

			// Each stage: move the clock, maybe change the DB step, use
			// the current segment until its prefetch starts, check the
			// step of the new segment, then use up the current one.
			stages := []struct {
				name         string
				advance      time.Duration
				dbStep       int64 // 0: unchanged
				wantStep     int64
				wantMinStep  int64
				wantLeafStep int64 // what Leaf itself would pick, when different
			}{
				{name: "within 15 min doubles", advance: time.Minute, wantStep: 4000, wantMinStep: 2000},
				{name: "after 30 min halves", advance: 31 * time.Minute, wantStep: 2000, wantMinStep: 2000},
				{name: "never below the DB step", advance: 31 * time.Minute, wantStep: 2000, wantMinStep: 2000},
				{name: "lowered DB step read back", advance: 31 * time.Minute, dbStep: 500, wantStep: 2000, wantMinStep: 500},
				{name: "halves to the new DB step floor", advance: 31 * time.Minute, wantStep: 1000, wantMinStep: 500},
				{name: "between 15 and 30 min keeps", advance: 20 * time.Minute, dbStep: 3000, wantStep: 1000, wantMinStep: 3000},
				{name: "raised DB step is a floor", advance: 20 * time.Minute, wantStep: 3000, wantMinStep: 3000, wantLeafStep: 1000},
				{name: "doubles again", advance: 14 * time.Minute, wantStep: 6000, wantMinStep: 3000},
			}
			for _, tt := range stages {
				clk.Add(tt.advance)
				if tt.dbStep != 0 {
					db.exec(t, "UPDATE leaf_alloc SET step = %d WHERE biz_tag = '%s'", tt.dbStep, tag)
				}
				before := db.maxID(t, tag)
				cur, _ := statsOf(g, tag)
				curMax := cur.Segments[cur.Pos].Max
				for {
					take(1)
					if st, _ := statsOf(g, tag); st.Loading || st.NextReady {
						break
					}
					if next >= curMax {
						t.Fatalf("%s: used the whole segment without a prefetch", tt.name)
					}
				}
				st := waitNextReady(t, g, tag)
				nx := st.Segments[1-st.Pos]
				if st.Step != tt.wantStep || nx.Max-nx.Value != tt.wantStep || st.MinStep != tt.wantMinStep {
					t.Fatalf("%s: Step %d, next segment [%d, %d), MinStep %d; want step %d, MinStep %d",
						tt.name, st.Step, nx.Value, nx.Max, st.MinStep, tt.wantStep, tt.wantMinStep)
				}
				if got := db.maxID(t, tag); got != before+tt.wantStep {
					t.Fatalf("%s: max_id = %d, want %d + %d", tt.name, got, before, tt.wantStep)
				}
				take(curMax - next) // use up the current segment
				if id := mustGet(t, g, tag); id != nx.Value {
					t.Fatalf("%s: first ID of the new segment Get(%q) = %d, want %d", tt.name, tag, id, nx.Value)
				}
				next++
			}
		})
	}
}

// TestStepCap: the step doubles only while twice it stays <= MaxStep.
func TestStepCap(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.create(t, "cap", 1, 100)
	g := newGen(t, db.st, segment.Config{Clock: clocktest.New(t0), MaxStep: 700})
	var steps []int64
	var lastMax int64
	for i := 0; len(steps) < 5; i++ {
		if i > 10_000 {
			t.Fatalf("only %d prefetches seen: steps %v", len(steps), steps)
		}
		mustGet(t, g, "cap")
		st, _ := statsOf(g, "cap")
		if st.Loading {
			st = waitNextReady(t, g, "cap")
		}
		if nx := st.Segments[1-st.Pos]; st.NextReady && nx.Max != lastMax {
			lastMax = nx.Max
			steps = append(steps, nx.Max-nx.Value)
		}
	}
	want := []int64{100, 200, 400, 400, 400}
	for i := range want {
		if steps[i] != want[i] {
			t.Fatalf("prefetched steps = %v, want %v (MaxStep 700)", steps, want)
		}
	}
}

// TestConcurrentUnique: 64 goroutines on a step-10 tag get only unique IDs,
// no errors, each inside a segment the database handed out.
func TestConcurrentUnique(t *testing.T) {
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.create(t, "hot", 1, 10)
			g := newGen(t, db.st, segment.Config{WaitTimeout: 5 * time.Second})
			const workers, each = 64, 500
			ids := make([][]int64, workers)
			var wg sync.WaitGroup
			var failed sync.Once
			for w := range workers {
				wg.Go(func() {
					for range each {
						id, err := g.Get(context.Background(), "hot")
						if err != nil {
							failed.Do(func() { t.Errorf("Get(%q) = %v, want an ID", "hot", err) })
							return
						}
						ids[w] = append(ids[w], id)
					}
				})
			}
			wg.Wait()
			maxID := db.maxID(t, "hot")
			checkUnique(t, ids, maxID, workers*each)
			st, _ := statsOf(g, "hot")
			if st.Issued != workers*each {
				t.Errorf("Stats Issued = %d, want %d", st.Issued, workers*each)
			}
		})
	}
}

// TestExhaustedWaitsForLoad makes the load slow for real: another
// transaction holds the row lock, so the allocation blocks in the database.
func TestExhaustedWaitsForLoad(t *testing.T) {
	for _, k := range []dbKind{postgresDB, mysqlDB} {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// setup returns a generator whose first segment [1, 11) is
			// used up and whose next load is blocked on the row lock.
			setup := func(t *testing.T, cfg segment.Config) (*segment.Generator, func()) {
				db := openDB(t, k.dsn(t))
				db.create(t, "slow", 1, 10)
				g := newGen(t, db.st, cfg)
				if id := mustGet(t, g, "slow"); id != 1 {
					t.Fatalf("Get(%q) = %d, want 1", "slow", id)
				}
				release := db.lockRow(t, "slow")
				for want := int64(2); want <= 10; want++ { // the 2nd starts the load
					if id := mustGet(t, g, "slow"); id != want {
						t.Fatalf("Get(%q) = %d, want %d", "slow", id, want)
					}
				}
				if st, _ := statsOf(g, "slow"); !st.Loading {
					t.Fatalf("Stats Loading = false after 10%% of the segment, want a load in flight")
				}
				return g, release
			}
			type result struct {
				id  int64
				err error
				d   time.Duration
			}
			getAsync := func(ctx context.Context, g *segment.Generator) <-chan result {
				ch := make(chan result, 1)
				go func() {
					start := time.Now()
					id, err := g.Get(ctx, "slow")
					ch <- result{id, err, time.Since(start)}
				}()
				return ch
			}

			t.Run("waits", func(t *testing.T) {
				g, release := setup(t, segment.Config{WaitTimeout: 10 * time.Second})
				ch := getAsync(ctx, g)
				select {
				case r := <-ch:
					t.Fatalf("Get(%q) = %d, %v while the load was blocked, want it to wait", "slow", r.id, r.err)
				case <-time.After(300 * time.Millisecond):
				}
				release()
				select {
				case r := <-ch:
					if r.err != nil || r.id != 11 {
						t.Fatalf("Get(%q) = %d, %v, want 11", "slow", r.id, r.err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("Get still waiting 5s after the row lock was released")
				}
			})
			t.Run("timeout", func(t *testing.T) {
				const wait = 300 * time.Millisecond
				g, release := setup(t, segment.Config{WaitTimeout: wait})
				r := <-getAsync(ctx, g)
				if !errors.Is(r.err, segment.ErrNoSegment) || segment.Code(r.err) != -3 {
					t.Fatalf("Get(%q) = %d, %v, want ErrNoSegment (-3)", "slow", r.id, r.err)
				}
				if r.d < wait || r.d > wait+700*time.Millisecond {
					t.Errorf("Get failed after %v, want about %v", r.d, wait)
				}
				release()
				// the load finishes after all and is used by the next caller
				waitFor(t, "the blocked load to land", func() bool { st, _ := statsOf(g, "slow"); return st.NextReady })
				if id := mustGet(t, g, "slow"); id != 11 {
					t.Fatalf("Get(%q) = %d, want 11", "slow", id)
				}
			})
			t.Run("context", func(t *testing.T) {
				g, _ := setup(t, segment.Config{WaitTimeout: 10 * time.Second})
				cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				r := <-getAsync(cctx, g)
				if !errors.Is(r.err, context.DeadlineExceeded) || segment.Code(r.err) != -3 {
					t.Fatalf("Get(%q) = %d, %v, want context.DeadlineExceeded as -3", "slow", r.id, r.err)
				}
				if r.d > time.Second {
					t.Errorf("Get returned %v after its context ended, want about 100ms", r.d)
				}
			})
			t.Run("close", func(t *testing.T) {
				g, _ := setup(t, segment.Config{WaitTimeout: 10 * time.Second})
				ch := getAsync(ctx, g)
				time.Sleep(100 * time.Millisecond)
				start := time.Now()
				g.Close() // cancels the blocked load and waits for it
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("Close took %v with a load blocked, want it to cancel the load", d)
				}
				if r := <-ch; !errors.Is(r.err, segment.ErrClosed) {
					t.Fatalf("Get(%q) = %d, %v during Close, want ErrClosed", "slow", r.id, r.err)
				}
				if _, err := g.Get(ctx, "slow"); !errors.Is(err, segment.ErrClosed) {
					t.Fatalf("Get(%q) after Close = %v, want ErrClosed", "slow", err)
				}
			})
		})
	}
}

// TestUnknownTag: a tag without a row answers -2 at once and is not cached.
func TestUnknownTag(t *testing.T) {
	t.Parallel()
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			g := newGen(t, db.st, segment.Config{})
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

// TestTagLifecycle: a row inserted while running is served on its first
// Get; a refresh lists it; a deleted row stops after the refresh.
func TestTagLifecycle(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.create(t, "old", 1, 100)
	g := newGen(t, db.st, segment.Config{})
	ctx := context.Background()

	db.create(t, "new", 41, 100)
	if id := mustGet(t, g, "new"); id != 41 {
		t.Fatalf("Get(%q) = %d, want 41 (inserted while running)", "new", id)
	}
	db.create(t, "later", 1, 100)
	if err := g.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	st, ok := statsOf(g, "later")
	if !ok || st.InitOK {
		t.Fatalf("after Refresh: later cached %v InitOK %v, want cached and not yet loaded", ok, st.InitOK)
	}
	if id := mustGet(t, g, "old"); id != 1 {
		t.Fatalf("Get(%q) = %d, want 1", "old", id)
	}
	if err := db.st.Delete(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if err := g.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if _, err := g.Get(ctx, "old"); segment.Code(err) != -2 {
		t.Fatalf("Get(%q) after delete and refresh = %v, want -2", "old", err)
	}
	if _, ok := statsOf(g, "old"); ok {
		t.Errorf("deleted tag still in Stats")
	}
	if id := mustGet(t, g, "new"); id != 42 {
		t.Fatalf("Get(%q) = %d, want 42", "new", id)
	}
}

// TestDeletedTagFoundByLoad: a load that finds the row gone drops the tag
// without waiting for the refresh.
func TestDeletedTagFoundByLoad(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.create(t, "gone", 1, 10)
	g := newGen(t, db.st, segment.Config{})
	mustGet(t, g, "gone")
	if err := db.st.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	for i := 2; ; i++ {
		id, err := g.Get(context.Background(), "gone")
		if err != nil {
			if segment.Code(err) != -2 {
				t.Fatalf("Get(%q) = %v, want -2", "gone", err)
			}
			break
		}
		if id >= 11 || i > 11 {
			t.Fatalf("Get(%q) = %d after the row was deleted, want only IDs < 11", "gone", id)
		}
	}
}

// TestRefreshFailureKeepsCache: a failing tag list leaves every tag served.
// A successful empty list (the table really is empty) empties the cache.
func TestRefreshFailureKeepsCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("failing", func(t *testing.T) {
		t.Parallel()
		db := openDB(t, sqliteDB.dsn(t))
		db.create(t, "a", 1, 1000)
		db.create(t, "b", 1, 1000)
		g := newGen(t, db.st, segment.Config{})
		mustGet(t, g, "a")
		db.st.Close() // the database is gone: every query fails
		if err := g.Refresh(ctx); err == nil {
			t.Fatal("Refresh on a closed store = nil, want an error")
		}
		if got := len(g.Stats()); got != 2 {
			t.Fatalf("len(Stats()) after a failed refresh = %d, want 2", got)
		}
		if id := mustGet(t, g, "a"); id != 2 {
			t.Fatalf("Get(%q) = %d, want 2 from the buffered segment", "a", id)
		}
	})
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		db := openDB(t, sqliteDB.dsn(t))
		db.create(t, "a", 1, 1000)
		g := newGen(t, db.st, segment.Config{})
		mustGet(t, g, "a")
		db.exec(t, "DELETE FROM leaf_alloc")
		if err := g.Refresh(ctx); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if got := g.Stats(); len(got) != 0 {
			t.Fatalf("Stats() after an empty table = %v, want none", got)
		}
	})
}

// TestMissLookupRateLimited: probing random tags reaches the database only
// as often as the limiter allows; the tags looked up are -2, the others -3
// (not looked up, retry later).
func TestMissLookupRateLimited(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.st}
	clk := clocktest.New(t0)
	g := newGen(t, cs, segment.Config{Clock: clk, MissLookupRate: 10, MissLookupBurst: 20})
	probe := func(round, lookups int) {
		for i := range 1000 {
			tag := fmt.Sprintf("probe-%d-%d", round, i)
			_, err := g.Get(context.Background(), tag)
			switch {
			case i < lookups && !errors.Is(err, segment.ErrTagNotFound):
				t.Fatalf("Get(%q) = %v, want ErrTagNotFound (-2) within the limit", tag, err)
			case i >= lookups && (!errors.Is(err, segment.ErrNoSegment) || segment.Code(err) != -3):
				t.Fatalf("Get(%q) = %v, want ErrNoSegment (-3) past the limit", tag, err)
			}
		}
	}
	probe(0, 20)
	if got := cs.allocs.Load(); got != 20 {
		t.Fatalf("Allocate calls for 1000 unknown tags = %d, want 20 (the burst)", got)
	}
	clk.Add(time.Second)
	probe(1, 10)
	if got := cs.allocs.Load(); got != 30 {
		t.Fatalf("Allocate calls one second later = %d, want 30 (burst + 10/s)", got)
	}
	if got := len(g.Stats()); got != 0 {
		t.Fatalf("len(Stats()) = %d after probing, want 0", got)
	}
}

// TestMissLookupLimitSpent: once unknown tags have spent the miss-lookup
// limit, a row really inserted meanwhile answers ErrNoSegment (-3, retry
// later), not ErrTagNotFound, without reaching the database, and is served
// once the limiter has a token again.
func TestMissLookupLimitSpent(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	cs := &countingStore{Store: db.st}
	clk := clocktest.New(t0)
	g := newGen(t, cs, segment.Config{Clock: clk, MissLookupRate: 1, MissLookupBurst: 2})
	ctx := context.Background()
	for i := range 2 {
		tag := fmt.Sprintf("typo-%d", i)
		if _, err := g.Get(ctx, tag); !errors.Is(err, segment.ErrTagNotFound) {
			t.Fatalf("Get(%q) = %v, want ErrTagNotFound", tag, err)
		}
	}
	db.create(t, "new", 70, 100)
	_, err := g.Get(ctx, "new")
	if !errors.Is(err, segment.ErrNoSegment) || segment.Code(err) != -3 {
		t.Fatalf("Get(%q) with the limit spent = %v, want ErrNoSegment (-3)", "new", err)
	}
	if !strings.Contains(err.Error(), "rate limit") {
		t.Errorf("Get(%q) error %q does not say the rate limit is spent", "new", err)
	}
	if _, err := g.Tag(ctx, "new"); !errors.Is(err, segment.ErrNoSegment) {
		t.Fatalf("Tag(%q) with the limit spent = %v, want ErrNoSegment", "new", err)
	}
	if got := cs.allocs.Load(); got != 2 {
		t.Fatalf("Allocate calls = %d, want 2: a refused lookup reaches no database", got)
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
	cs := &countingStore{Store: db.st}
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
	loop()
	if got := cs.allocs.Load(); got != 1 {
		t.Fatalf("Allocate calls for 1000 Gets of one missing tag = %d, want 1", got)
	}
	db.create(t, "new", 70, 100)
	if id := mustGet(t, g, "new"); id != 70 {
		t.Fatalf("Get(%q) after the loop = %d, want 70", "new", id)
	}

	// Remembered for two seconds, then looked up again (limiter: 1/s).
	db.create(t, "typo", 500, 100)
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
	db.create(t, "later", 900, 100)
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
	cs := &countingStore{Store: db.st}
	g := newGen(t, cs, segment.Config{})
	const tags, n = 10, 32
	for i := range tags {
		tag := fmt.Sprintf("fresh-%d", i)
		db.create(t, tag, 1, 1000)
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
		if got := cs.allocs.Load(); got != int64(i+1) {
			t.Fatalf("Allocate calls after %d tags = %d, want one per tag, shared by %d concurrent misses", i+1, got, n)
		}
	}
}

// TestBackoffSparesDatabase: while loads fail, neither the fast path past
// the prefetch mark nor exhausted callers start a new allocation each; they
// get -3 at once, and after the backoff one retry runs.
func TestBackoffSparesDatabase(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.create(t, "flaky", 1, 100)
	cs := &countingStore{Store: db.st}
	clk := clocktest.New(t0)
	g := newGen(t, cs, segment.Config{Clock: clk, RetryMin: time.Second, RetryMax: 4 * time.Second})
	mustGet(t, g, "flaky")
	db.st.Close()
	for want := int64(2); want <= 100; want++ { // the 11th starts a load that fails
		if id := mustGet(t, g, "flaky"); id != want {
			t.Fatalf("Get(%q) = %d, want %d", "flaky", id, want)
		}
		if want == 11 {
			waitFor(t, "the failed load", func() bool { st, _ := statsOf(g, "flaky"); return st.LoadFailures == 1 && !st.Loading })
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
	if got := cs.loadCalls(); got != 2 {
		t.Fatalf("Allocate and MaxID calls = %d, want 2 (first load, one failed prefetch)", got)
	}
	clk.Add(time.Second) // the first backoff is RetryMin jittered down to at least half
	if _, err := g.Get(context.Background(), "flaky"); !errors.Is(err, segment.ErrNoSegment) {
		t.Fatalf("Get(%q) = %v, want ErrNoSegment", "flaky", err)
	}
	if got := cs.loadCalls(); got != 3 {
		t.Fatalf("Allocate and MaxID calls after the backoff = %d, want 3", got)
	}
	st, _ := statsOf(g, "flaky")
	if st.LoadFailures != 2 || st.LastError == "" || st.RetryAt.IsZero() {
		t.Errorf("Stats = failures %d, last error %q, retry at %v; want 2, an error, a retry time", st.LoadFailures, st.LastError, st.RetryAt)
	}
}

// slowTags is a real store whose Rows, after reading the tag list, waits
// until release is closed, so a test can act between the read and its use.
type slowTags struct {
	segment.Store
	read    chan struct{}
	release chan struct{}
}

func (s *slowTags) Rows(ctx context.Context) ([]store.Row, error) {
	rows, err := s.Store.Rows(ctx)
	s.read <- struct{}{}
	<-s.release
	return rows, err
}

// TestRefreshKeepsNewerMiss: a refresh whose list was read before a miss
// lookup added a tag does not drop that tag (it would skip its segment).
func TestRefreshKeepsNewerMiss(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	st := &slowTags{Store: db.st, read: make(chan struct{}), release: make(chan struct{})}
	g := newGen(t, &slowTagsAfterFirst{slowTags: st}, segment.Config{})
	done := make(chan error, 1)
	go func() { done <- g.Refresh(context.Background()) }()
	<-st.read // the list (empty) is read; the refresh has not applied it yet
	db.create(t, "mid", 1, 1000)
	if id := mustGet(t, g, "mid"); id != 1 {
		t.Fatalf("Get(%q) = %d, want 1", "mid", id)
	}
	close(st.release)
	if err := <-done; err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if id := mustGet(t, g, "mid"); id != 2 {
		t.Fatalf("Get(%q) after the stale refresh = %d, want 2 (same segment)", "mid", id)
	}
}

// slowTagsAfterFirst lets New's first Rows through and slows later ones.
type slowTagsAfterFirst struct {
	*slowTags
	calls atomic.Int64
}

func (s *slowTagsAfterFirst) Rows(ctx context.Context) ([]store.Row, error) {
	if s.calls.Add(1) == 1 {
		return s.slowTags.Store.Rows(ctx)
	}
	return s.slowTags.Rows(ctx)
}

// TestGetAfterClose: every Get after Close answers ErrClosed (-3).
func TestGetAfterClose(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.create(t, "c", 1, 1000)
	g := newGen(t, db.st, segment.Config{})
	mustGet(t, g, "c")
	if err := g.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	for _, tag := range []string{"c", "unknown"} {
		if _, err := g.Get(context.Background(), tag); !errors.Is(err, segment.ErrClosed) || segment.Code(err) != -3 {
			t.Fatalf("Get(%q) after Close = %v, want ErrClosed (-3)", tag, err)
		}
	}
}

// TestDatabaseCut puts a real TCP proxy between the generator and
// PostgreSQL and cuts it: the buffered segments keep serving, then Get
// answers -3 (never an ID the database did not hand out), a refresh fails
// without dropping the tag, and the generator recovers by itself once the
// database is back.
func TestDatabaseCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := postgresDB.dsn(t)
	db := openDB(t, direct)
	db.create(t, "cut", 1, 100)
	var px *faultproxy.Proxy
	proxied := viaProxy(t, direct, func(upstream string) string {
		px = faultproxy.Start(t, upstream)
		return px.Addr()
	})
	st, err := dsn.Open(ctx, proxied, false)
	if err != nil {
		t.Fatalf("open via proxy: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	const wait = 300 * time.Millisecond
	g := newGen(t, st, segment.Config{WaitTimeout: wait, LoadTimeout: time.Second,
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})

	seen := map[int64]bool{}
	for want := int64(1); want <= 20; want++ {
		if id := mustGet(t, g, "cut"); id != want {
			t.Fatalf("Get(%q) = %d, want %d", "cut", id, want)
		}
		seen[want] = true
	}
	waitNextReady(t, g, "cut")
	maxBefore := db.maxID(t, "cut") // 201: segments [1,101) and [101,201) are ours
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
	if _, ok := statsOf(g, "cut"); !ok {
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
	db := openDB(t, direct)
	db.create(t, "lag", 1, 10)
	var px *faultproxy.Proxy
	proxied := viaProxy(t, direct, func(upstream string) string {
		px = faultproxy.Start(t, upstream)
		return px.Addr()
	})
	st, err := dsn.Open(ctx, proxied, false)
	if err != nil {
		t.Fatalf("open via proxy: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &countingStore{Store: st}
	g := newGen(t, cs, segment.Config{WaitTimeout: 5 * time.Second})
	mustGet(t, g, "lag")
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
	t.Logf("%d IDs through a 50ms link in %v with %d allocations", len(seen), time.Since(start), cs.allocs.Load())
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
	db := openDB(t, direct)
	db.create(t, "early", 1, 100)
	var px *faultproxy.Proxy
	proxied := viaProxy(t, direct, func(upstream string) string {
		px = faultproxy.Start(t, upstream)
		return px.Addr()
	})
	st, err := dsn.Open(ctx, proxied, false)
	if err != nil {
		t.Fatalf("open via proxy: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	px.Cut()
	g := newGen(t, st, segment.Config{LoadTimeout: time.Second,
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	if g.Ready() {
		t.Fatal("Ready() = true with the database cut")
	}
	if _, err := g.Get(ctx, "early"); segment.Code(err) != -1 {
		t.Fatalf("Get(%q) with the database cut before any tag list = %v, want -1", "early", err)
	}
	px.Restore(t)
	waitFor(t, "Ready after the database came back", g.Ready)
	if id := mustGet(t, g, "early"); id < 1 {
		t.Fatalf("Get(%q) = %d, want an ID", "early", id)
	}
}

// TestPrefetchRetriedWhileServing: a prefetch that failed is retried after
// its backoff by a later request that the current segment still serves
// (SPEC §2, rule 6), not only once the segment runs out. The table is
// renamed away to make the load fail for real.
func TestPrefetchRetriedWhileServing(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.create(t, "flaky", 1, 100)
	clk := clocktest.New(t0)
	g := newGen(t, db.st, segment.Config{Clock: clk, RetryMin: time.Second, RetryMax: 4 * time.Second})
	mustGet(t, g, "flaky")
	db.exec(t, "ALTER TABLE leaf_alloc RENAME TO leaf_alloc_away")
	for want := int64(2); want <= 20; want++ { // the 11th starts a load that fails
		if id := mustGet(t, g, "flaky"); id != want {
			t.Fatalf("Get(%q) = %d, want %d", "flaky", id, want)
		}
		if want == 11 {
			waitFor(t, "the failed load", func() bool { st, _ := statsOf(g, "flaky"); return st.LoadFailures == 1 && !st.Loading })
		}
	}
	db.exec(t, "ALTER TABLE leaf_alloc_away RENAME TO leaf_alloc")
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
// Known true for a tag the tag list had or an allocation found, and false
// for a failed miss lookup; a lookup that found no row is not a load.
func TestOnLoad(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.create(t, "listed", 1, 100)
	db.create(t, "listed2", 1, 100)
	var (
		mu     sync.Mutex
		events []segment.LoadEvent
	)
	onLoad := func(e segment.LoadEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	g := newGen(t, db.st, segment.Config{OnLoad: onLoad})
	ctx := context.Background()
	mustGet(t, g, "listed")
	if _, err := g.Get(ctx, "missing"); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("Get(%q) = %v, want ErrTagNotFound", "missing", err)
	}
	db.create(t, "probed", 1, 100)
	db.create(t, "late", 1, 100)
	mustGet(t, g, "probed")
	db.st.Close()
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
		{"listed2", true, true},
		{"late", true, false},
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
