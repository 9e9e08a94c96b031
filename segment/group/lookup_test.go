package group_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/bizno"
	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
)

// TestGroupDeclaredElsewhere: a grouped tag declared straight on the
// database (leafctl, or another server's admin API) after this server read
// leaf_group is served on its first request, not after the next re-read
// (60 s by default); a name without a declaration is ErrNotGrouped, found
// by a lookup that is then remembered, and still served once declared a
// second later.
func TestGroupDeclaredElsewhere(t *testing.T) {
	for _, db := range allDBs {
		t.Run(db.name, func(t *testing.T) {
			d := openDB(t, db.dsn(t))
			clock := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			s := startGroupServer(t, d, clock, t.TempDir())
			ctx := context.Background()
			st := d.Store

			if _, err := s.gs.Next(ctx, "late", 1, nil); !errors.Is(err, group.ErrNotGrouped) || !strings.Contains(err.Error(), `leaf_group has no declaration of "late"`) {
				t.Fatalf("Next(late) before any declaration = %v, want ErrNotGrouped saying leaf_group has none", err)
			}
			// As leafctl tag create --group does it: on the database only.
			if err := group.Declare(ctx, st, store.Group{BizTag: "order", Grp: "day", TimeZone: "UTC", Format: "ORD{yyyyMMdd}{seq:4}", Step: 10}); err != nil {
				t.Fatalf("group.Declare(order) = %v", err)
			}
			ids, err := s.gs.Next(ctx, "order", 2, nil)
			if err != nil || len(ids) != 2 || ids[0] != "ORD202612010001" || ids[1] != "ORD202612010002" {
				t.Fatalf("first Next(order, 2) after a declaration on the database = %q, %v, want ORD202612010001, ORD202612010002", ids, err)
			}
			if !s.gs.Has("order") {
				t.Error("Has(order) = false after it was served")
			}
			if err := group.Declare(ctx, st, store.Group{BizTag: "late", Grp: "year", TimeZone: "UTC", Format: "{yyyy}{seq:4}", Step: 10}); err != nil {
				t.Fatalf("group.Declare(late) = %v", err)
			}
			if _, err := s.gs.Next(ctx, "late", 1, nil); !errors.Is(err, group.ErrNotGrouped) {
				t.Fatalf("Next(late) right after its miss = %v, want ErrNotGrouped (remembered for a second)", err)
			}
			clock.Add(time.Second)
			if ids, err := s.gs.Next(ctx, "late", 1, nil); err != nil || len(ids) != 1 || ids[0] != "20260001" {
				t.Fatalf("Next(late) a second later = %q, %v, want 20260001", ids, err)
			}
			if g, err := s.gs.Find(ctx, "late"); err != nil || g.Format != "{yyyy}{seq:4}" {
				t.Fatalf("Find(late) = %+v, %v, want its declaration", g, err)
			}
		})
	}
}

// TestGroupPruneLive: a prune through a server whose clock is a day ahead
// is refused (ErrPruneLive): the period it would delete is the one every
// correctly set server serves, and the database's clock says so. Periods
// that ended before both clocks (by PruneMargin) are pruned.
func TestGroupPruneLive(t *testing.T) {
	for _, db := range allDBs {
		t.Run(db.name, func(t *testing.T) {
			d := openDB(t, db.dsn(t))
			now := time.Now()
			right := startGroupServer(t, d, clocktest.New(now), t.TempDir())
			ahead := startGroupServer(t, d, clocktest.New(now.Add(24*time.Hour)), t.TempDir())
			ctx := context.Background()
			declare(t, right.gs, store.Group{BizTag: "order", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10})
			key := func(at time.Time) string { return bizno.Day.Key(bizno.Day.Start(at, time.UTC)) }
			for _, s := range []*groupServer{right, ahead} {
				if _, err := s.gs.Next(ctx, "order", 1, nil); err != nil {
					t.Fatalf("Next(order) = %v", err)
				}
			}
			today, tomorrow := key(now), key(now.Add(24*time.Hour))
			_, err := ahead.gs.Prune(ctx, "order", tomorrow)
			if !errors.Is(err, group.ErrPruneLive) || !strings.Contains(err.Error(), "the database's clock reads") {
				t.Fatalf("Prune(before %s) through the server a day ahead = %v, want ErrPruneLive naming the database's clock", tomorrow, err)
			}
			if ids, err := right.gs.Next(ctx, "order", 1, nil); err != nil || !strings.HasPrefix(ids[0], today) {
				t.Fatalf("Next(order) on the correctly set server after the refused prune = %q, %v, want an ID of %s", ids, err, today)
			}
			// The same refusal from leafctl (no server), whose clock is ahead.
			decl, _ := right.gs.Declaration("order")
			if _, err := group.Prune(ctx, d.Store, decl, tomorrow, now.Add(24*time.Hour)); !errors.Is(err, group.ErrPruneLive) {
				t.Fatalf("group.Prune(before %s) with the clock a day ahead = %v, want ErrPruneLive", tomorrow, err)
			}
			// Yesterday's period ended long ago on every clock: pruned.
			yesterday := key(now.Add(-24 * time.Hour))
			if err := d.Store.Create(ctx, store.Row{BizTag: group.RowTag("order", yesterday), MaxID: 1, Step: 10}); err != nil {
				t.Fatalf("create yesterday's row: %v", err)
			}
			deleted, err := right.gs.Prune(ctx, "order", today)
			if now.Sub(bizno.Day.Start(now, time.UTC)) < group.DefaultPruneMargin {
				t.Skipf("within %v of midnight UTC: yesterday may still be served (Prune = %v)", group.DefaultPruneMargin, err)
			}
			if err != nil || len(deleted) != 1 || deleted[0] != group.RowTag("order", yesterday) {
				t.Fatalf("Prune(before %s) = %q, %v, want yesterday's row deleted", today, deleted, err)
			}
		})
	}
}
