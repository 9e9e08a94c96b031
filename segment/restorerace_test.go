package segment_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// hookedAllocate runs hook once, right before the next Allocate reaches the store: a
// restore that lands after everything a load may have read and before its allocating
// statement.
type hookedAllocate struct {
	segment.Store
	mu   sync.Mutex
	hook func()
}

func (s *hookedAllocate) Allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, error) {
	s.mu.Lock()
	hook := s.hook
	s.hook = nil
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	return s.Store.Allocate(ctx, tag, step, mark)
}

// TestRestoreBetweenCheckAndAllocate: two generators share a row (step 10). B holds
// [1, 11) and [11, 21) (mark 21); A hands out 21..30 and holds [31, 41) (mark 41). The
// row is put back to max_id 11 (a lagging replica promoted) just before A's next
// allocation reaches the database. That allocation must be refused by its own UPDATE
// (max_id >= mark, store.ErrBelowMark) and leave max_id at 11; then B, whose mark is
// 21, refuses too, and nobody repeats A's IDs. An allocation not guarded in the
// statement would take [11, 21), which A refuses (below its mark) but which carries
// max_id to 21, B's mark: B then takes [21, 31), the IDs A handed out. That is the race
// TestRestoredBackup's replica mode hit on MariaDB (100 duplicates) when the mark was
// checked by a read of max_id before the allocation, in a separate statement.
func TestRestoreBetweenCheckAndAllocate(t *testing.T) {
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "race", 1, 10)
	cfg := func(name string) segment.Config {
		c := fastRetry
		c.Marks = segment.NewFileMarks(filepath.Join(t.TempDir(), name+".json"))
		c.GrowWindow, c.ShrinkWindow = time.Nanosecond, time.Hour // step stays 10
		return c
	}
	hs := &hookedAllocate{Store: db.Store}
	b := newGen(t, db.Store, cfg("b"))
	seenB := map[int64]bool{mustGet(t, b, "race"): true, mustGet(t, b, "race"): true}
	waitNextReady(t, b, "race")
	a := newGen(t, hs, cfg("a"))
	seenA := map[int64]bool{}
	for range 10 {
		seenA[mustGet(t, a, "race")] = true
	}
	waitNextReady(t, a, "race")
	t.Logf("A handed out %v; max_id %d", seenA, db.MaxID(t, "race"))

	hs.mu.Lock()
	hs.hook = func() { db.Exec(t, "UPDATE leaf_alloc SET max_id = 11 WHERE biz_tag = 'race'") }
	hs.mu.Unlock()
	seenA[mustGet(t, a, "race")] = true // 31
	seenA[mustGet(t, a, "race")] = true // 32, and A's next load: rewound, then allocating
	waittest.For(t, 10*time.Second, "A refusing", func() bool { st, _ := statsOf(a, "race"); return st.Refusing })
	if got := db.MaxID(t, "race"); got != 11 {
		t.Errorf("max_id after A's refusal = %d, want 11: the refused allocation moved it", got)
	}

	refused := false
	for range 28 {
		id, err := b.Get(context.Background(), "race")
		if err != nil {
			if !errors.Is(err, segment.ErrRewound) {
				t.Fatalf("B.Get(%q) = %v, want an error wrapping %v", "race", err, segment.ErrRewound)
			}
			refused = true
			break
		}
		if seenA[id] {
			t.Fatalf("B handed out %d, which A handed out before the restore", id)
		}
		seenB[id] = true
	}
	if !refused {
		t.Errorf("B served 28 IDs after the rewind, want it to refuse once its 20 buffered IDs ran out")
	}
}
