package group_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/segtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
)

// TestGroupReloadTurnHonoursContext: a re-read of leaf_group (the group
// admin routes make one after a change) waiting for its turn while another
// re-read is stalled on a database that does not answer gives up with its
// context, as the generator's Refresh does (issue 16 item 7).
func TestGroupReloadTurnHonoursContext(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	st := segtest.NewStallRows(db.Store)
	g := newGen(t, db.Store, segment.Config{})
	gs, err := group.New(context.Background(), g, st, group.Config{
		PeriodsPath: filepath.Join(t.TempDir(), "group-periods.json"), Tick: time.Hour})
	if err != nil {
		t.Fatalf("group.New: %v", err)
	}
	defer gs.Close()
	segtest.WaitTurn(t, st, gs.Reload)
}

// stallCreate is a real store whose Create, while stall is set, blocks
// until its context ends.
type stallCreate struct {
	store.Store
	stall atomic.Bool
}

func (s *stallCreate) Create(ctx context.Context, r store.Row) error {
	if s.stall.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Create(ctx, r)
}

// TestPeriodSwitchBounded: a grouped tag's switch to a new period, whose
// row insert the database does not answer, ends with the generator's
// WaitTimeout (the request answers an error in time), not with the
// LoadTimeout that bounds the insert itself.
func TestPeriodSwitchBounded(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	st := &stallCreate{Store: db.Store}
	g := newGen(t, st, segment.Config{WaitTimeout: 50 * time.Millisecond, LoadTimeout: time.Hour})
	gs, err := group.New(context.Background(), g, st, group.Config{
		PeriodsPath: filepath.Join(t.TempDir(), "group-periods.json"), Tick: time.Hour})
	if err != nil {
		t.Fatalf("group.New: %v", err)
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
