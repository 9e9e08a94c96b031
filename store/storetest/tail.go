package storetest

import (
	"errors"
	"testing"

	"github.com/leaf-go/leaf/store"
)

// testReturnTail checks store.Store.ReturnTail (issue 22 item 2): the
// compare-and-set lowers max_id only while it is still the caller's, records
// the return with its sequence number, is a no-op after any later allocation,
// refuses a stale sequence number (rolling the lowering back) and bad
// arguments.
func testReturnTail(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "tail", MaxID: 1, Step: 100})
	create(t, s, store.Row{BizTag: "other", MaxID: 1, Step: 100})
	if r, err := s.TailReturnOf(ctx, "tail"); err != nil || r.Seq != 0 {
		t.Fatalf("TailReturnOf before any return = %+v, %v, want Seq 0", r, err)
	}
	if _, err := s.Allocate(ctx, "tail", 0, 0); err != nil { // [1, 101)
		t.Fatal(err)
	}
	// A stale compare value changes nothing.
	if ok, err := s.ReturnTail(ctx, "tail", 100, 40, 1); ok || err != nil {
		t.Fatalf("ReturnTail(from 100, max_id 101) = %v, %v, want false, nil", ok, err)
	}
	if ok, err := s.ReturnTail(ctx, "tail", 101, 40, 1); !ok || err != nil {
		t.Fatalf("ReturnTail(101 -> 40, seq 1) = %v, %v, want true, nil", ok, err)
	}
	if got := row(t, s, "tail").MaxID; got != 40 {
		t.Fatalf("max_id after the return = %d, want 40", got)
	}
	want := store.TailReturn{BizTag: "tail", From: 101, To: 40, Seq: 1}
	if r, err := s.TailReturnOf(ctx, "tail"); err != nil || r != want {
		t.Fatalf("TailReturnOf = %+v, %v, want %+v", r, err, want)
	}
	if all, err := s.TailReturns(ctx); err != nil || len(all) != 1 || all[0] != want {
		t.Fatalf("TailReturns = %+v, %v, want [%+v]", all, err, want)
	}
	a, err := s.Allocate(ctx, "tail", 0, 0) // continues at 40: [40, 140)
	if err != nil || a.MaxID != 140 {
		t.Fatalf("Allocate after the return = %+v, %v, want max_id 140", a, err)
	}
	// A second return with a stale seq (1 again) is rolled back whole.
	if ok, err := s.ReturnTail(ctx, "tail", 140, 90, 1); ok || err != nil {
		t.Fatalf("ReturnTail with a stale seq = %v, %v, want false, nil", ok, err)
	}
	if got := row(t, s, "tail").MaxID; got != 140 {
		t.Fatalf("max_id after a refused return = %d, want 140 (rolled back)", got)
	}
	if ok, err := s.ReturnTail(ctx, "tail", 140, 90, 2); !ok || err != nil {
		t.Fatalf("ReturnTail(140 -> 90, seq 2) = %v, %v, want true, nil", ok, err)
	}
	// Another server allocated after ours: the compare-and-set is a no-op.
	if _, err := s.Allocate(ctx, "tail", 0, 0); err != nil { // [90, 190)
		t.Fatal(err)
	}
	if ok, err := s.ReturnTail(ctx, "tail", 140, 95, 3); ok || err != nil {
		t.Fatalf("ReturnTail after another allocation = %v, %v, want false, nil", ok, err)
	}
	if got := row(t, s, "tail").MaxID; got != 190 {
		t.Fatalf("max_id = %d, want 190 untouched", got)
	}
	if got := row(t, s, "other").MaxID; got != 1 {
		t.Fatalf("max_id of another tag = %d, want 1", got)
	}
	for _, bad := range [][3]int64{{190, 190, 3}, {190, 0, 3}, {190, 200, 3}, {190, 100, 0}} {
		if ok, err := s.ReturnTail(ctx, "tail", bad[0], bad[1], bad[2]); ok || !errors.Is(err, store.ErrBadRow) {
			t.Errorf("ReturnTail(from %d, to %d, seq %d) = %v, %v, want ErrBadRow", bad[0], bad[1], bad[2], ok, err)
		}
	}
	if ok, err := s.ReturnTail(ctx, "missing", 101, 40, 1); ok || err != nil {
		t.Errorf("ReturnTail of a missing tag = %v, %v, want false, nil", ok, err)
	}

	// A tag deleted and re-created by force below its tombstone: the new row
	// reaches the old row's max_id (101) again, and a server stopping with a
	// segment of the old row must not lower it into IDs the new row handed
	// out. The kept tombstone turns the compare-and-set into a no-op.
	create(t, s, store.Row{BizTag: "re", MaxID: 1, Step: 100})
	if _, err := s.Allocate(ctx, "re", 0, 0); err != nil { // old row: [1, 101)
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForceCreate(ctx, store.Row{BizTag: "re", MaxID: 2, Step: 99}); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Allocate(ctx, "re", 0, 0); err != nil || a.MaxID != 101 { // new row: [2, 101)
		t.Fatalf("Allocate after the forced re-create = %+v, %v, want max_id 101", a, err)
	}
	if ok, err := s.ReturnTail(ctx, "re", 101, 2, 1); ok || err != nil {
		t.Fatalf("ReturnTail into a force-re-created row = %v, %v, want false, nil", ok, err)
	}
	if got := row(t, s, "re").MaxID; got != 101 {
		t.Fatalf("max_id after the refused return = %d, want 101", got)
	}
}
