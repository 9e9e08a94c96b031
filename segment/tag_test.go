package segment_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// mustTag returns the handle on tag.
func mustTag(t testing.TB, g *segment.Generator, tag string) *segment.Tag {
	t.Helper()
	h, err := g.Tag(context.Background(), tag)
	if err != nil {
		t.Fatalf("Tag(%q) = %v, want a handle", tag, err)
	}
	return h
}

// TestTagAndGetUnique: goroutines taking IDs of one step-10 tag through two
// handles and through Generator.Get at once get only unique IDs, every one
// inside what the database handed out, and together exactly as many as they
// asked for.
func TestTagAndGetUnique(t *testing.T) {
	t.Parallel()
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "hot", 1, 10)
			g := newGen(t, db.Store, segment.Config{WaitTimeout: 5 * time.Second})
			handles := []*segment.Tag{mustTag(t, g, "hot"), mustTag(t, g, "hot")}
			const workers, each = 48, 500
			ids := make([][]int64, workers)
			var wg sync.WaitGroup
			var failed sync.Once
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						var (
							id  int64
							err error
						)
						// Each worker alternates, so Get and the handles
						// race on the same segments and switches.
						switch (w + i) % 3 {
						case 0:
							id, err = g.Get(context.Background(), "hot")
						default:
							id, err = handles[(w+i)%2].Get(context.Background())
						}
						if err != nil {
							failed.Do(func() { t.Errorf("worker %d call %d: %v, want an ID", w, i, err) })
							return
						}
						ids[w] = append(ids[w], id)
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			maxID := db.MaxID(t, "hot")
			checkUnique(t, ids, maxID, workers*each)
			if st, _ := statsOf(g, "hot"); st.Issued != workers*each {
				t.Errorf("Stats Issued = %d, want %d (handles count like Get)", st.Issued, workers*each)
			}
		})
	}
}

// TestTagResolve: Tag answers what Get answers for the same tag, and takes
// no ID; a tag inserted while running is found by the miss lookup.
func TestTagResolve(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "known", 1, 100)
	cs := &countingStore{Store: db.Store}
	// The clock stands still: a miss is remembered for good.
	g := newGen(t, cs, segment.Config{Clock: clocktest.New(t0)})
	ctx := context.Background()

	if id, err := mustTag(t, g, "known").Get(ctx); err != nil || id != 1 {
		t.Fatalf("Tag(%q).Get = %d, %v, want 1", "known", id, err)
	}
	db.Create(t, "inserted", 41, 100)
	h := mustTag(t, g, "inserted") // miss lookup: loads the first segment
	if st, ok := statsOf(g, "inserted"); !ok || !st.InitOK {
		t.Fatalf("after Tag(%q): cached %v InitOK %v, want a loaded buffer", "inserted", ok, st.InitOK)
	}
	if id, err := h.Get(ctx); err != nil || id != 41 {
		t.Fatalf("Tag(%q).Get = %d, %v, want 41 (Tag takes no ID)", "inserted", id, err)
	}
	if id := mustGet(t, g, "inserted"); id != 42 {
		t.Fatalf("Get(%q) = %d after the handle's 41, want 42", "inserted", id)
	}

	// The first lookup of an unknown tag asks the database; the second is
	// answered from the remembered miss, without it.
	for range 2 {
		_, err := g.Tag(ctx, "no-such-tag")
		if !errors.Is(err, segment.ErrTagNotFound) || segment.Code(err) != -2 {
			t.Fatalf("Tag(%q) = %v, want ErrTagNotFound (-2)", "no-such-tag", err)
		}
	}
	if got := cs.Allocs.Load(); got != 2 {
		t.Errorf("Allocate calls = %d, want 2 (known, inserted; lookups read the tag list)", got)
	}
	if got := cs.RowsCalls.Load(); got != 1 {
		t.Errorf("Rows calls = %d, want 1 (New's refresh; lookups ask for their names only)", got)
	}
	if got := cs.FindCalls.Load(); got != 2 {
		t.Errorf("FindTags calls = %d, want 2 (the lookups of inserted and of no-such-tag once)", got)
	}
	if _, ok := statsOf(g, "no-such-tag"); ok {
		t.Error("unknown tag left in the cache by Tag")
	}
}

// TestTagDropped: a handle whose tag a refresh dropped answers
// ErrTagNotFound as Get does, and serves again once the row is back, from
// the buffer Get uses too.
func TestTagDropped(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "gone", 1, 1000)
	clk := clocktest.New(t0)
	g := newGen(t, db.Store, segment.Config{Clock: clk})
	ctx := context.Background()
	h := mustTag(t, g, "gone")
	if id, err := h.Get(ctx); err != nil || id != 1 {
		t.Fatalf("Tag(%q).Get = %d, %v, want 1", "gone", id, err)
	}

	if err := db.Store.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := g.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	// 998 IDs of [1, 1001) are still in memory: the handle must not serve
	// them once the tag is dropped.
	for range 3 {
		if id, err := h.Get(ctx); !errors.Is(err, segment.ErrTagNotFound) || segment.Code(err) != -2 {
			t.Fatalf("Tag(%q).Get after delete and refresh = %d, %v, want ErrTagNotFound (-2)", "gone", id, err)
		}
	}
	if _, err := g.Get(ctx, "gone"); segment.Code(err) != -2 {
		t.Fatalf("Get(%q) after delete and refresh = %v, want -2", "gone", err)
	}

	// Re-created above what was handed out: the same handle serves again
	// once the miss is no longer remembered (two seconds).
	db.Create(t, "gone", 5001, 1000)
	if _, err := h.Get(ctx); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("Tag(%q).Get right after re-create = %v, want ErrTagNotFound (miss remembered)", "gone", err)
	}
	clk.Add(2 * time.Second)
	if id, err := h.Get(ctx); err != nil || id != 5001 {
		t.Fatalf("Tag(%q).Get after re-create = %d, %v, want 5001", "gone", id, err)
	}
	if id := mustGet(t, g, "gone"); id != 5002 {
		t.Fatalf("Get(%q) = %d after the handle's 5001, want 5002 (one buffer)", "gone", id)
	}
	if id, err := h.Get(ctx); err != nil || id != 5003 {
		t.Fatalf("Tag(%q).Get = %d, %v, want 5003", "gone", id, err)
	}
}

// TestTagDroppedByLoad: a load that finds the row gone drops the tag; the
// handle then stops at once, like Get, instead of serving the rest of the
// segment in memory.
func TestTagDroppedByLoad(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "gone", 1, 10)
	g := newGen(t, db.Store, segment.Config{})
	h := mustTag(t, g, "gone")
	if _, err := h.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Store.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	// The second ID is past the 10% mark: its prefetch finds the row gone.
	if _, err := h.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 10*time.Second, "the tag dropped by the prefetch", func() bool {
		_, ok := statsOf(g, "gone")
		return !ok
	})
	if id, err := h.Get(context.Background()); segment.Code(err) != -2 {
		t.Fatalf("Tag(%q).Get after the load found the row gone = %d, %v, want -2", "gone", id, err)
	}
}

// TestTagRecreatedLower: a tag deleted and re-created below what was
// handed out is refused through the handle exactly as through Get: the
// high-water mark outlives the dropped buffer.
func TestTagRecreatedLower(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "again", 1, 100)
	g := newGen(t, db.Store, fastRetry)
	ctx := context.Background()
	h := mustTag(t, g, "again")
	seen := map[int64]bool{}
	for range 150 {
		id, err := h.Get(ctx)
		if err != nil || seen[id] {
			t.Fatalf("Tag(%q).Get = %d, %v: error or repeated", "again", id, err)
		}
		seen[id] = true
	}
	waitNextReady(t, g, "again")
	high := db.MaxID(t, "again")
	// Deleted with plain SQL: no tombstone (store.Store.Delete would leave
	// one, and Create below it would be refused before the mark is asked).
	db.Exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'again'")
	if err := g.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	db.Create(t, "again", 1, 100)

	_, err := h.Get(ctx)
	if !errors.Is(err, segment.ErrRewound) || segment.Code(err) != -3 {
		t.Fatalf("Tag(%q).Get after re-create below the mark = %v, want ErrRewound as -3", "again", err)
	}
	_, err = g.Get(ctx, "again")
	if !errors.Is(err, segment.ErrNoSegment) || segment.Code(err) != -3 {
		t.Fatalf("Get(%q) after re-create below the mark = %v, want -3", "again", err)
	}
	if st, _ := statsOf(g, "again"); !st.Refusing || st.HighWater != high {
		t.Fatalf("Stats: Refusing=%v HighWater=%d, want true, %d", st.Refusing, st.HighWater, high)
	}
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if id, err := h.Get(ctx); err == nil {
			t.Fatalf("Tag(%q).Get = %d while refusing, want an error", "again", id)
		}
	}
}

// TestTagAfterClose: after Close the handle answers ErrClosed (-3) although
// its segment still holds IDs, and Tag does too.
func TestTagAfterClose(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "c", 1, 1000)
	g := newGen(t, db.Store, segment.Config{})
	ctx := context.Background()
	h := mustTag(t, g, "c")
	if _, err := h.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	for range 3 {
		if id, err := h.Get(ctx); !errors.Is(err, segment.ErrClosed) || segment.Code(err) != -3 {
			t.Fatalf("Tag(%q).Get after Close = %d, %v, want ErrClosed (-3)", "c", id, err)
		}
	}
	if _, err := g.Tag(ctx, "c"); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("Tag(%q) after Close = %v, want ErrClosed", "c", err)
	}
}

// TestTagDuringClose: handles in use while Close runs hand out unique IDs,
// and only ErrClosed once it has returned.
func TestTagDuringClose(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "c", 1, 50)
	g := newGen(t, db.Store, segment.Config{})
	h := mustTag(t, g, "c")
	var (
		mu     sync.Mutex
		seen   = map[int64]bool{}
		closed = make(chan struct{})
		wg     sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-closed:
					if id, err := h.Get(context.Background()); !errors.Is(err, segment.ErrClosed) {
						t.Errorf("Tag.Get after Close returned = %d, %v, want ErrClosed", id, err)
					}
					return
				default:
				}
				id, err := h.Get(context.Background())
				if err != nil {
					continue // ErrClosed, or a load Close cancelled
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
	time.Sleep(20 * time.Millisecond)
	g.Close()
	close(closed)
	wg.Wait()
}

// gateStore lets a test hold Allocate of one tag until released and hide
// that tag from the tag list, so that a refresh drops it while its load is
// in flight.
type gateStore struct {
	segment.Store
	tag     string
	hidden  atomic.Bool
	entered chan struct{} // receives when Allocate of tag starts, if armed
	release chan struct{} // closed to let it go on
	armed   atomic.Bool
}

func (s *gateStore) Allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, error) {
	if tag == s.tag && s.armed.CompareAndSwap(true, false) {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.Allocate(ctx, tag, step, mark)
}

func (s *gateStore) Rows(ctx context.Context) ([]store.Row, error) {
	rows, err := s.Store.Rows(ctx)
	if s.hidden.Load() {
		rows = slices.DeleteFunc(rows, func(r store.Row) bool { return r.BizTag == s.tag })
	}
	return rows, err
}

// TestTagDroppedDuringLoad: a refresh drops the tag while its first load is
// in flight. The load's segment is not installed in the dropped buffer, so
// the handle moves to the buffer Get uses instead of serving a segment of
// its own: their IDs stay consecutive.
func TestTagDroppedDuringLoad(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "x", 1, 100)
	gs := &gateStore{Store: db.Store, tag: "x", entered: make(chan struct{}), release: make(chan struct{})}
	g := newGen(t, gs, segment.Config{})
	ctx := context.Background()
	h := mustTag(t, g, "x") // listed by the first refresh: no load yet
	gs.armed.Store(true)
	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := h.Get(ctx)
		done <- result{id, err}
	}()
	<-gs.entered
	gs.hidden.Store(true)
	if err := g.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	gs.hidden.Store(false) // dropped; the row is still there for the lookup
	close(gs.release)
	r := <-done
	if r.err != nil {
		t.Fatalf("Tag(%q).Get = %v, want an ID from the buffer found again", "x", r.err)
	}
	id := mustGet(t, g, "x")
	next, err := h.Get(ctx)
	if err != nil || id != r.id+1 || next != id+1 {
		t.Fatalf("handle %d, Get %d, handle %d, %v: want consecutive IDs from one buffer", r.id, id, next, err)
	}
}
