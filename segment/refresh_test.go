package segment_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/segtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// TestTagLifecycle: a row inserted while running is served on its first
// Get; a refresh lists it; a deleted row stops after the refresh.
func TestTagLifecycle(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "old", 1, 100)
	g := newGen(t, db.Store, segment.Config{})
	ctx := context.Background()

	db.Create(t, "new", 41, 100)
	if id := mustGet(t, g, "new"); id != 41 {
		t.Fatalf("Get(%q) = %d, want 41 (inserted while running)", "new", id)
	}
	db.Create(t, "later", 1, 100)
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
	if err := db.Store.Delete(ctx, "old"); err != nil {
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
	db.Create(t, "gone", 1, 10)
	g := newGen(t, db.Store, segment.Config{})
	mustGet(t, g, "gone")
	if err := db.Store.Delete(context.Background(), "gone"); err != nil {
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
		db.Create(t, "a", 1, 1000)
		db.Create(t, "b", 1, 1000)
		g := newGen(t, db.Store, segment.Config{})
		mustGet(t, g, "a")
		db.Store.Close() // the database is gone: every query fails
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
		db.Create(t, "a", 1, 1000)
		g := newGen(t, db.Store, segment.Config{})
		mustGet(t, g, "a")
		db.Exec(t, "DELETE FROM leaf_alloc")
		if err := g.Refresh(ctx); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if got := g.Stats(); len(got) != 0 {
			t.Fatalf("Stats() after an empty table = %v, want none", got)
		}
	})
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
	st := &slowTags{Store: db.Store, read: make(chan struct{}), release: make(chan struct{})}
	g := newGen(t, &slowTagsAfterFirst{slowTags: st}, segment.Config{})
	done := make(chan error, 1)
	go func() { done <- g.Refresh(context.Background()) }()
	<-st.read // the list (empty) is read; the refresh has not applied it yet
	db.Create(t, "mid", 1, 1000)
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

// slowTagsAfterFirst slows only the second Rows (the test's Refresh): New's
// first and the miss lookups' later ones go through.
type slowTagsAfterFirst struct {
	*slowTags
	calls atomic.Int64
}

func (s *slowTagsAfterFirst) Rows(ctx context.Context) ([]store.Row, error) {
	if s.calls.Add(1) != 2 {
		return s.slowTags.Store.Rows(ctx)
	}
	return s.slowTags.Rows(ctx)
}

// TestRefreshTurnHonoursContext: a Refresh waiting for its turn while the
// refresh loop's re-read is stalled on a database that does not answer
// gives up with its context (an admin create re-reads the tag list within
// --wait-timeout; issue 16 item 7).
func TestRefreshTurnHonoursContext(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "a", 1, 100)
	st := segtest.NewStallRows(db.Store)
	g := newGen(t, st, segment.Config{LoadTimeout: time.Hour})
	segtest.WaitTurn(t, st, g.Refresh)
	if id := mustGet(t, g, "a"); id != 1 {
		t.Fatalf("Get(%q) = %d, want 1", "a", id)
	}
}
