package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/leaf-go/leaf/store"
)

// testGroups checks leaf_group: create, duplicate, list, update (format
// and group untouched), pruned_before only ever raised, delete.
func testGroups(t *testing.T, s store.Store) {
	ctx := context.Background()
	g := store.Group{BizTag: "order", Grp: "day", TimeZone: "Asia/Shanghai", Format: "ORD{yyyyMMdd}{seq:6}", Step: 100, Retention: 30}
	if err := s.CreateGroup(ctx, g); err != nil {
		t.Fatalf("CreateGroup = %v", err)
	}
	if err := s.CreateGroup(ctx, g); !errors.Is(err, store.ErrTagExists) {
		t.Fatalf("CreateGroup again = %v, want ErrTagExists", err)
	}
	if err := s.CreateGroup(ctx, store.Group{BizTag: "Order", Grp: "year", TimeZone: "UTC", Format: "{yyyy}{seq:4}", Step: 1}); err != nil {
		t.Fatalf("CreateGroup(Order) = %v, want tags compared case-sensitively", err)
	}
	up := g
	up.TimeZone, up.Step, up.Retention, up.Description = "UTC", 200, 0, "orders"
	up.Format, up.Grp = "X{yyyy}{seq:3}", "year" // must not change
	if err := s.UpdateGroup(ctx, up); err != nil {
		t.Fatalf("UpdateGroup = %v", err)
	}
	if err := s.UpdateGroup(ctx, up); err != nil {
		t.Fatalf("UpdateGroup unchanged = %v, want nil", err)
	}
	if err := s.UpdateGroup(ctx, store.Group{BizTag: "nope", Step: 1}); !errors.Is(err, store.ErrTagNotFound) {
		t.Fatalf("UpdateGroup(nope) = %v, want ErrTagNotFound", err)
	}
	for _, tt := range []struct{ give, want string }{{"20261101", "20261101"}, {"20261001", "20261101"}, {"20261201", "20261201"}} {
		if got, err := s.RaisePrunedBefore(ctx, "order", tt.give); err != nil || got != tt.want {
			t.Fatalf("RaisePrunedBefore(%s) = %q, %v, want %s", tt.give, got, err, tt.want)
		}
	}
	if _, err := s.RaisePrunedBefore(ctx, "nope", "2026"); !errors.Is(err, store.ErrTagNotFound) {
		t.Fatalf("RaisePrunedBefore(nope) = %v, want ErrTagNotFound", err)
	}
	list, err := s.Groups(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("Groups = %+v, %v, want 2", list, err)
	}
	want := store.Group{BizTag: "order", Grp: "day", TimeZone: "UTC", Format: "ORD{yyyyMMdd}{seq:6}", Step: 200, PrunedBefore: "20261201", Description: "orders"}
	if list[1] != want {
		t.Fatalf("Groups()[1] = %+v, want %+v", list[1], want)
	}
	if err := s.DeleteGroup(ctx, "order"); err != nil {
		t.Fatalf("DeleteGroup = %v", err)
	}
	if err := s.DeleteGroup(ctx, "order"); !errors.Is(err, store.ErrTagNotFound) {
		t.Fatalf("DeleteGroup again = %v, want ErrTagNotFound", err)
	}
}
