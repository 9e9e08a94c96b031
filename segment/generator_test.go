package segment_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestWorkedExample is docs/contract.md §6 on every store: row
// (leaf-segment-test, 1, 2000) gives 1 first, prefetches once more than 200
// IDs are used, gives 2001 as the 2001st ID, and then follows Leaf's dynamic
// step.
func TestWorkedExample(t *testing.T) {
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			const tag = "leaf-segment-test"
			db.Create(t, tag, 1, 2000)
			clk := clocktest.New(t0)
			g := newGen(t, db.Store, segment.Config{Clock: clk})

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
			if got := db.MaxID(t, tag); got != 2001 {
				t.Fatalf("max_id after 200 IDs = %d, want 2001 (no load yet)", got)
			}
			take(1) // the 201st: idle 1799 < 1800 starts the load
			st := waitNextReady(t, g, tag)
			if got := db.MaxID(t, tag); got != 4001 {
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
					db.Exec(t, "UPDATE leaf_alloc SET step = %d WHERE biz_tag = '%s'", tt.dbStep, tag)
				}
				before := db.MaxID(t, tag)
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
				if got := db.MaxID(t, tag); got != before+tt.wantStep {
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
	db.Create(t, "cap", 1, 100)
	g := newGen(t, db.Store, segment.Config{Clock: clocktest.New(t0), MaxStep: 700})
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
			db.Create(t, "hot", 1, 10)
			g := newGen(t, db.Store, segment.Config{WaitTimeout: 5 * time.Second})
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
			maxID := db.MaxID(t, "hot")
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
				db.Create(t, "slow", 1, 10)
				g := newGen(t, db.Store, cfg)
				if id := mustGet(t, g, "slow"); id != 1 {
					t.Fatalf("Get(%q) = %d, want 1", "slow", id)
				}
				release := db.LockRow(t, "slow")
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
				// It waits for the blocked load. Only time can tell: the generator
				// counts no waiting callers, so watch for an early answer a while.
				waittest.Quiet(t, 300*time.Millisecond, "Get returned while the load was blocked", func() bool { return len(ch) > 0 })
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
				waittest.For(t, 10*time.Second, "the blocked load to land", func() bool { st, _ := statsOf(g, "slow"); return st.NextReady })
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

// TestGetAfterClose: every Get after Close answers ErrClosed (-3).
func TestGetAfterClose(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "c", 1, 1000)
	g := newGen(t, db.Store, segment.Config{})
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
