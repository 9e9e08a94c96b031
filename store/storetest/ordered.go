package storetest

import (
	"errors"
	"testing"

	"github.com/leaf-go/leaf/store"
)

// testOrdered: Create writes the ordered flag with the row, Rows reads it in
// the same query, a duplicate Create leaves it alone, Delete removes it (and
// leaves the tombstone, which refuses an ordered Create below it), and
// a plain Create over a stale leaf_ordered row (a tag deleted by plain SQL,
// as a Java Leaf operator would) clears it: a tag created plain is never
// served as ordered.
func testOrdered(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "ord", Step: 10, Ordered: true})
	create(t, s, store.Row{BizTag: "plain", Step: 10})
	if got := row(t, s, "ord"); !got.Ordered || got.MaxID != 1 || got.Step != 10 {
		t.Errorf(`Rows() "ord" = %+v, want Ordered, max_id 1, step 10`, got)
	}
	if got := row(t, s, "plain"); got.Ordered {
		t.Errorf(`Rows() "plain" = %+v, want not Ordered`, got)
	}
	// A duplicate plain Create must not clear the flag of the existing row.
	if err := s.Create(ctx, store.Row{BizTag: "ord", Step: 10}); !errors.Is(err, store.ErrTagExists) {
		t.Fatalf("duplicate Create = %v, want ErrTagExists", err)
	}
	if !row(t, s, "ord").Ordered {
		t.Errorf("after a refused duplicate Create, ord is no longer ordered")
	}
	// An ordered tag allocates a custom step like any row.
	a, err := s.Allocate(ctx, "ord", 7, 0)
	if err != nil || a.MaxID != 8 || a.Step != 7 {
		t.Fatalf(`Allocate("ord", 7) = %+v, %v, want max_id 8, step 7`, a, err)
	}
	if err := s.Delete(ctx, "ord"); err != nil {
		t.Fatalf("Delete(ord) = %v", err)
	}
	// Delete left the tombstone at max_id 8 (defaults): an ordered Create
	// below it is refused whole, and a plain one at it is the new row.
	if err := s.Create(ctx, store.Row{BizTag: "ord", Step: 10, Ordered: true}); !errors.Is(err, store.ErrBelowTombstone) {
		t.Fatalf("ordered Create below the tombstone = %v, want ErrBelowTombstone", err)
	}
	create(t, s, store.Row{BizTag: "ord", MaxID: 8, Step: 10})
	if row(t, s, "ord").Ordered {
		t.Errorf("ord deleted and created plain is still ordered")
	}
	x, ok := s.(ExecSQL)
	if !ok {
		return
	}
	create(t, s, store.Row{BizTag: "stale", Step: 10, Ordered: true})
	if err := x.ExecSQL(ctx, `DELETE FROM leaf_alloc WHERE biz_tag = 'stale'`); err != nil {
		t.Fatalf("raw delete: %v", err)
	}
	create(t, s, store.Row{BizTag: "stale", Step: 10})
	if row(t, s, "stale").Ordered {
		t.Errorf("a plain Create over a stale leaf_ordered row left the tag ordered")
	}
}
