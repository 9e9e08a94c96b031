package segment_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// bothStores is what the SQL stores are: a segment store with leaf_group.
type bothStores interface {
	segment.Store
	segment.GroupStore
}

// stallRows is a real store whose Rows and Groups, while stall is set,
// block until their context ends (a database connection black-holed by a
// partition), saying so on stalled first.
type stallRows struct {
	bothStores
	stall   atomic.Bool
	stalled chan struct{}
}

func (s *stallRows) block(ctx context.Context) error {
	s.stalled <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

func (s *stallRows) Rows(ctx context.Context) ([]store.Row, error) {
	if s.stall.Load() {
		return nil, s.block(ctx)
	}
	return s.bothStores.Rows(ctx)
}

func (s *stallRows) Groups(ctx context.Context) ([]store.Group, error) {
	if s.stall.Load() {
		return nil, s.block(ctx)
	}
	return s.bothStores.Groups(ctx)
}

// waitTurn runs call with a context that ends after 50 ms while another
// call holds the turn, stalled on the database, and fails unless call gives
// up with its context (it used to wait on a mutex until the stalled call
// ended: here never, so the test's 30 s liveness limit would end it).
func waitTurn(t *testing.T, st *stallRows, call func(context.Context) error) {
	t.Helper()
	holder, release := context.WithCancel(context.Background())
	defer release()
	first := make(chan error, 1)
	st.stall.Store(true)
	go func() { first <- call(holder) }()
	<-st.stalled // the first call holds the turn, inside the store
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- call(ctx) }()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "under way") {
			t.Errorf("call while another is stalled = %v, want its context's deadline, waiting for the one under way", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a call waited for the turn held by a stalled call past its own context's deadline")
	}
	select {
	case err := <-first:
		t.Fatalf("the stalled call returned %v before its context ended", err)
	default:
	}
	release()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("stalled call after its context ended = %v, want context.Canceled", err)
	}
	st.stall.Store(false)
	if err := call(context.Background()); err != nil {
		t.Fatalf("call after the stalled one gave up = %v, want nil (the turn is free again)", err)
	}
}

// TestRefreshTurnHonoursContext: a Refresh waiting for its turn while the
// refresh loop's re-read is stalled on a database that does not answer
// gives up with its context (an admin create re-reads the tag list within
// --wait-timeout; issue 16 item 7).
func TestRefreshTurnHonoursContext(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "a", 1, 100)
	st := &stallRows{bothStores: db.Store.(bothStores), stalled: make(chan struct{}, 1)}
	g := newGen(t, st, segment.Config{LoadTimeout: time.Hour})
	waitTurn(t, st, g.Refresh)
	if id := mustGet(t, g, "a"); id != 1 {
		t.Fatalf("Get(%q) = %d, want 1", "a", id)
	}
}

// TestGroupReloadTurnHonoursContext: the same for the re-read of leaf_group
// that the group admin routes make after a change.
func TestGroupReloadTurnHonoursContext(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	st := &stallRows{bothStores: db.Store.(bothStores), stalled: make(chan struct{}, 1)}
	g := newGen(t, db.Store, segment.Config{})
	gs, err := segment.NewGroups(context.Background(), g, st, segment.GroupConfig{
		PeriodsPath: filepath.Join(t.TempDir(), "group-periods.json"), Tick: time.Hour})
	if err != nil {
		t.Fatalf("NewGroups: %v", err)
	}
	defer gs.Close()
	waitTurn(t, st, gs.Reload)
}

// stallCreate is a real store whose Create, while stall is set, blocks
// until its context ends.
type stallCreate struct {
	bothStores
	stall atomic.Bool
}

func (s *stallCreate) Create(ctx context.Context, r store.Row) error {
	if s.stall.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.bothStores.Create(ctx, r)
}

// TestPeriodSwitchBounded: a grouped tag's switch to a new period, whose
// row insert the database does not answer, ends with the generator's
// WaitTimeout (the request answers an error in time), not with the
// LoadTimeout that bounds the insert itself.
func TestPeriodSwitchBounded(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	st := &stallCreate{bothStores: db.Store.(bothStores)}
	g := newGen(t, st, segment.Config{WaitTimeout: 50 * time.Millisecond, LoadTimeout: time.Hour})
	gs, err := segment.NewGroups(context.Background(), g, st, segment.GroupConfig{
		PeriodsPath: filepath.Join(t.TempDir(), "group-periods.json"), Tick: time.Hour})
	if err != nil {
		t.Fatalf("NewGroups: %v", err)
	}
	defer gs.Close()
	if err := gs.Declare(context.Background(), store.Group{BizTag: "order", Grp: "day", TimeZone: "UTC",
		Format: "ORD{yyyyMMdd}{seq:6}", Step: 100}); err != nil {
		t.Fatalf("Declare: %v", err)
	}
	st.stall.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := gs.Next(context.Background(), "order", 1, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Next with the period row's insert unanswered = %v, want the wait timeout's deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Next waited for the period row's insert past the wait timeout")
	}
	st.stall.Store(false)
	// The period's row read and first load still have the 50 ms
	// WaitTimeout, which a loaded machine may pass; the load goes on in the
	// background (its own LoadTimeout), so a later Next is served. Wait for
	// that, with a deadline.
	for deadline := time.Now().Add(30 * time.Second); ; {
		ids, err := gs.Next(context.Background(), "order", 1, nil)
		if err == nil && len(ids) == 1 {
			break
		}
		waited := errors.Is(err, segment.ErrNoSegment) || errors.Is(err, context.DeadlineExceeded)
		if err == nil || !waited || time.Now().After(deadline) {
			t.Fatalf("Next once the database answers = %v, %v, want one ID (within 30 s)", ids, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
