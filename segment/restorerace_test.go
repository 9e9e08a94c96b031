package segment_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
)

// hookedMaxID runs hook once, right after the next MaxID call returns: a restore that
// lands between a load's max_id check and its allocation.
type hookedMaxID struct {
	segment.Store
	mu   sync.Mutex
	hook func()
}

func (s *hookedMaxID) MaxID(ctx context.Context, tag string) (int64, error) {
	v, err := s.Store.MaxID(ctx, tag)
	s.mu.Lock()
	hook := s.hook
	s.hook = nil
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	return v, err
}

// TestRestoreBetweenCheckAndAllocate: two generators share a row (step 10). B holds
// [1, 11) and [11, 21) (mark 21); A hands out 21..30 and holds [31, 41) (mark 41). The
// row is put back to max_id 11 (a lagging replica promoted) while A's next load is
// between its max_id check (41, fine) and its allocation: the allocation gets [11, 21),
// which A refuses (below its mark) but which carries max_id to 21, B's mark. B then
// passes its own check and takes [21, 31): the IDs A handed out. It fails on the code of
// 2026-12-07 (branch sleeps): the max_id check and the allocation are two statements, so a
// rewind between them still burns a segment (the race TestRestoredBackup's replica mode
// hit on MariaDB, 100 duplicates). An allocation conditional on max_id >= the mark, in the
// UPDATE itself, would close it.
func TestRestoreBetweenCheckAndAllocate(t *testing.T) {
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "race", 1, 10)
	cfg := func(name string) segment.Config {
		c := fastRetry
		c.Marks = segment.NewFileMarks(filepath.Join(t.TempDir(), name+".json"))
		c.GrowWindow, c.ShrinkWindow = time.Nanosecond, time.Hour // step stays 10
		return c
	}
	hs := &hookedMaxID{Store: db.Store}
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
	seenA[mustGet(t, a, "race")] = true // 32, and A's next load: checked, then rewound
	waittest.For(t, 10*time.Second, "A refusing", func() bool { st, _ := statsOf(a, "race"); return st.Refusing })
	t.Logf("after A's refusal: max_id %d", db.MaxID(t, "race"))

	for range 28 {
		id, err := b.Get(context.Background(), "race")
		if err != nil {
			t.Logf("B refuses: %v", err)
			break
		}
		if seenA[id] {
			t.Fatalf("B handed out %d, which A handed out before the restore", id)
		}
		seenB[id] = true
	}
}
