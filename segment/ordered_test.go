package segment_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// createOrdered inserts an ordered leaf_alloc row through the store.
func createOrdered(t testing.TB, d *testDB, tag string, maxID, step int64) {
	t.Helper()
	if err := d.Store.Create(context.Background(), store.Row{BizTag: tag, MaxID: maxID, Step: step, Ordered: true}); err != nil {
		t.Fatalf("Create(%q, ordered): %v", tag, err)
	}
}

// TestOrderedRealTime: two generators on one database take turns on an
// ordered tag; each ID must be the next one the table holds, because
// nothing is buffered. A plain tag would answer the second generator from
// its own segment, far from the first's.
func TestOrderedRealTime(t *testing.T) {
	for _, db := range allDBs {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			d := openDB(t, db.dsn(t))
			createOrdered(t, d, "ord", 1, 1000)
			g1 := newGen(t, d.Store, segment.Config{})
			g2 := newGen(t, d.Store, segment.Config{})
			for i := int64(1); i <= 20; i++ {
				g := g1
				if i%2 == 0 {
					g = g2
				}
				if got := mustGet(t, g, "ord"); got != i {
					t.Fatalf("Get #%d = %d, want %d (the next ID in the table)", i, got, i)
				}
			}
			if got := d.MaxID(t, "ord"); got != 21 {
				t.Errorf("max_id = %d, want 21 (one ID per request, nothing buffered)", got)
			}
			st, _ := statsOf(g1, "ord")
			if !st.Ordered || st.Issued != 10 || st.Batches != 10 || st.Remaining != 0 {
				t.Errorf("Stats(ord) = %+v, want Ordered, Issued 10, Batches 10, Remaining 0", st)
			}
			// A Tag handle and GetN serve the tag the same way.
			h, err := g1.Tag(context.Background(), "ord")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := h.Get(context.Background()); err != nil || got != 21 {
				t.Fatalf("Tag.Get = %d, %v, want 21", got, err)
			}
			ids := make([]int64, 5)
			if err := g2.GetN(context.Background(), "ord", ids); err != nil {
				t.Fatal(err)
			}
			if want := []int64{22, 23, 24, 25, 26}; fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("GetN(5) = %v, want %v", ids, want)
			}
		})
	}
}

// TestOrderedGroupCommit: requests that arrive while an allocation is in
// flight share the next one: one database write for all of them, in the
// order they were taken, every ID above the one in flight.
func TestOrderedGroupCommit(t *testing.T) {
	for _, db := range []dbKind{postgresDB, mysqlDB} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			d := openDB(t, db.dsn(t))
			createOrdered(t, d, "ord", 1, 1000)
			cs := &countingStore{Store: d.Store}
			g := newGen(t, cs, segment.Config{WaitTimeout: time.Minute, LoadTimeout: time.Minute})
			release := d.LockRow(t, "ord")
			first := make(chan int64, 1)
			go func() { first <- mustGet(t, g, "ord") }()
			waittest.For(t, 10*time.Second, "first allocation in flight", func() bool {
				st, _ := statsOf(g, "ord")
				return st.Loading && st.Waiting == 0 && cs.Allocs.Load() == 1
			})
			const n = 32
			ids := make([]int64, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids[i] = mustGet(t, g, "ord")
				}()
			}
			waittest.For(t, 10*time.Second, "requests queued", func() bool {
				st, _ := statsOf(g, "ord")
				return st.Waiting == n
			})
			release()
			wg.Wait()
			f := <-first
			if f != 1 {
				t.Errorf("first ID = %d, want 1", f)
			}
			seen := map[int64]bool{}
			for _, id := range ids {
				if id <= f || id > f+n || seen[id] {
					t.Fatalf("IDs %v: want each of %d..%d once", ids, f+1, f+n)
				}
				seen[id] = true
			}
			if got := cs.Allocs.Load(); got != 2 {
				t.Errorf("Allocate calls = %d, want 2 (the queued requests share one)", got)
			}
			if got := d.MaxID(t, "ord"); got != f+n+1 {
				t.Errorf("max_id = %d, want %d", got, f+n+1)
			}
		})
	}
}

// TestOrderedFailedBatch: an allocation the database refuses fails every
// request of its batch with Leaf's code, and hands out no ID.
func TestOrderedFailedBatch(t *testing.T) {
	d := openDB(t, postgresDB.dsn(t))
	createOrdered(t, d, "ord", 1, 1000)
	g := newGen(t, d.Store, segment.Config{WaitTimeout: 30 * time.Second})
	mustGet(t, g, "ord")
	d.Exec(t, "UPDATE leaf_alloc SET max_id = 9223372036854775807 WHERE biz_tag = 'ord'")
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			id, err := g.Get(context.Background(), "ord")
			if err == nil {
				err = fmt.Errorf("got ID %d past int64's end", id)
			}
			errs <- err
		}()
	}
	for range n {
		err := <-errs
		if !errors.Is(err, store.ErrOverflow) || segment.Code(err) != -3 {
			t.Errorf("Get after max_id reached int64's end = %v (code %d), want ErrOverflow, code -3", err, segment.Code(err))
		}
	}
	d.Exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'ord'")
	if _, err := g.Get(context.Background(), "ord"); !errors.Is(err, segment.ErrTagNotFound) || segment.Code(err) != -2 {
		t.Errorf("Get of a deleted ordered tag = %v (code %d), want ErrTagNotFound, code -2", err, segment.Code(err))
	}
}

// TestOrderedRewound: a table taken back in time (a restored backup) would
// hand the ordered tag's IDs out again; the high-water mark refuses it until
// max_id is fenced forward.
func TestOrderedRewound(t *testing.T) {
	d := openDB(t, postgresDB.dsn(t))
	createOrdered(t, d, "ord", 1, 1000)
	g := newGen(t, d.Store, segment.Config{})
	for range 3 {
		mustGet(t, g, "ord")
	}
	d.Exec(t, "UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'ord'")
	if id, err := g.Get(context.Background(), "ord"); !errors.Is(err, segment.ErrRewound) || segment.Code(err) != -3 {
		t.Fatalf("Get after the table went back = %d, %v, want ErrRewound (code -3)", id, err)
	}
	if st, _ := statsOf(g, "ord"); !st.Refusing || st.HighWater != 4 {
		t.Errorf("Stats = %+v, want Refusing, HighWater 4", st)
	}
	d.Exec(t, "UPDATE leaf_alloc SET max_id = 4 WHERE biz_tag = 'ord'") // the fence
	if got := mustGet(t, g, "ord"); got != 4 {
		t.Errorf("Get after the fence = %d, want 4", got)
	}
}

// TestOrderedMissLookup: a generator that started before the tag existed
// learns that it is ordered from the miss lookup's row, before its first
// allocation.
func TestOrderedMissLookup(t *testing.T) {
	for _, db := range []dbKind{postgresDB, mysqlDB} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			d := openDB(t, db.dsn(t))
			g1 := newGen(t, d.Store, segment.Config{})
			g2 := newGen(t, d.Store, segment.Config{})
			createOrdered(t, d, "late", 1, 1000)
			for i := int64(1); i <= 4; i++ {
				g := g1
				if i%2 == 0 {
					g = g2
				}
				if got := mustGet(t, g, "late"); got != i {
					t.Fatalf("Get #%d = %d, want %d", i, got, i)
				}
			}
			if st, _ := statsOf(g1, "late"); !st.Ordered {
				t.Errorf("Stats(late) = %+v, want Ordered", st)
			}
		})
	}
}

// TestOrderedTurnsOrdered: a plain tag whose leaf_ordered row appears (an
// operator's SQL) drops its buffered segment at the next refresh; no ID of
// that segment is handed out after it, from the generator or from a Tag
// handle holding it.
func TestOrderedTurnsOrdered(t *testing.T) {
	d := openDB(t, postgresDB.dsn(t))
	d.Create(t, "tag", 1, 1000)
	g := newGen(t, d.Store, segment.Config{})
	h, err := g.Tag(context.Background(), "tag")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h.Get(context.Background()); err != nil || got != 1 {
		t.Fatalf("Tag.Get = %d, %v, want 1", got, err)
	}
	d.Exec(t, "INSERT INTO leaf_ordered (biz_tag) VALUES ('tag')")
	if err := g.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	above := d.MaxID(t, "tag")
	if got := mustGet(t, g, "tag"); got != above {
		t.Errorf("Get after the tag turned ordered = %d, want %d (the table's next ID, not the buffer's)", got, above)
	}
	if got, err := h.Get(context.Background()); err != nil || got != above+1 {
		t.Errorf("Tag.Get after the tag turned ordered = %d, %v, want %d", got, err, above+1)
	}
}
