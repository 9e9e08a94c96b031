package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaf-go/leaf/store"
)

// RunNotOpen checks a server dialect's store built but not started
// (postgres.New, mysql.New): every call fails with [store.ErrNotOpen] and
// reaches no table, then start opens it and it serves. ref must be an open
// store on the same fresh, migrated, empty database as built; start is
// built's Start. RunNotOpen writes the row "gate" through ref first, and
// closes neither store.
func RunNotOpen(t *testing.T, ref, built store.Store, start func(ctx context.Context, migrate bool) error) {
	t.Helper()
	ctx := ctxT(t)
	want := store.Row{BizTag: "gate", MaxID: 1, Step: 10, Description: "kept"}
	create(t, ref, want)
	const worker = 7
	calls := []struct {
		name string
		call func() error
	}{
		{"Allocate", func() error { _, err := built.Allocate(ctx, "gate", 0, 0); return err }},
		{"Allocate custom step", func() error { _, err := built.Allocate(ctx, "gate", 5, 0); return err }},
		{"Tags", func() error { _, err := built.Tags(ctx); return err }},
		{"Rows", func() error { _, err := built.Rows(ctx); return err }},
		{"FindTags", func() error { _, err := built.FindTags(ctx, []string{"gate"}); return err }},
		{"MaxID", func() error { _, err := built.MaxID(ctx, "gate"); return err }},
		{"Create", func() error { return built.Create(ctx, store.Row{BizTag: "new", Step: 1}) }},
		{"ForceCreate", func() error { _, err := built.ForceCreate(ctx, store.Row{BizTag: "forced", Step: 1}); return err }},
		{"Update", func() error { return built.Update(ctx, "gate", 99, "changed") }},
		{"Fence", func() error { _, err := built.Fence(ctx, "gate", 1000); return err }},
		{"ReturnTail", func() error { _, err := built.ReturnTail(ctx, "gate", 11, 1, 1); return err }},
		{"TailReturns", func() error { _, err := built.TailReturns(ctx); return err }},
		{"TailReturnOf", func() error { _, err := built.TailReturnOf(ctx, "gate"); return err }},
		{"Delete", func() error { return built.Delete(ctx, "gate") }},
		{"Groups", func() error { _, err := built.Groups(ctx); return err }},
		{"FindGroups", func() error { _, err := built.FindGroups(ctx, []string{"gate"}); return err }},
		{"Now", func() error { _, err := built.Now(ctx); return err }},
		{"CreateGroup", func() error {
			return built.CreateGroup(ctx, store.Group{BizTag: "grp", Grp: "day", TimeZone: "UTC", Format: "G{yyyyMMdd}{seq:4}", Step: 10})
		}},
		{"UpdateGroup", func() error {
			return built.UpdateGroup(ctx, store.Group{BizTag: "grp", Grp: "day", TimeZone: "UTC", Format: "G{yyyyMMdd}{seq:4}", Step: 20})
		}},
		{"RaisePrunedBefore", func() error { _, err := built.RaisePrunedBefore(ctx, "grp", "20260101"); return err }},
		{"DeleteGroup", func() error { return built.DeleteGroup(ctx, "grp") }},
		{"ClaimWorker", func() error {
			_, err := built.ClaimWorker(ctx, store.Claim{Owner: "notopen", MaxWorker: worker, TTL: 10 * time.Second})
			return err
		}},
		{"RenewWorker", func() error { _, err := built.RenewWorker(ctx, worker, 1, 10*time.Second, 0, 0); return err }},
		{"ReleaseWorker", func() error { return built.ReleaseWorker(ctx, worker, 1, 0) }},
		{"LiveHolders", func() error { _, _, err := built.LiveHolders(ctx); return err }},
		{"Engine", func() error { _, err := built.Engine(ctx); return err }},
		{"Ping", func() error { return built.Ping(ctx) }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, store.ErrNotOpen) {
			t.Errorf("%s before the start = %v, want %v", c.name, err, store.ErrNotOpen)
		}
	}
	// Nothing reached the database: the row, the tag list, the groups and
	// the leases are as ref left them.
	if got := row(t, ref, "gate"); got.MaxID != want.MaxID || got.Step != want.Step || got.Description != want.Description {
		t.Errorf("row after the refused calls = %+v, want max_id %d, step %d, description %q", got, want.MaxID, want.Step, want.Description)
	}
	if tags, err := ref.Tags(ctx); err != nil || len(tags) != 1 {
		t.Errorf("Tags after the refused calls = %v, %v, want [gate]", tags, err)
	}
	if groups, err := ref.Groups(ctx); err != nil || len(groups) != 0 {
		t.Errorf("Groups after the refused calls = %v, %v, want none", groups, err)
	}
	if returns, err := ref.TailReturns(ctx); err != nil || len(returns) != 0 {
		t.Errorf("TailReturns after the refused calls = %v, %v, want none", returns, err)
	}
	if holders, _, err := ref.LiveHolders(ctx); err != nil || len(holders) != 0 {
		t.Errorf("LiveHolders after the refused calls = %v, %v, want none", holders, err)
	}

	if err := start(ctx, false); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	a, err := built.Allocate(ctx, "gate", 0, 0)
	if err != nil || a.Start() != 1 || a.MaxID != 11 {
		t.Fatalf("Allocate after the start = %+v, %v, want [1, 11)", a, err)
	}
	if err := built.Ping(ctx); err != nil {
		t.Errorf("Ping after the start = %v", err)
	}
	if got := row(t, ref, "gate"); got.MaxID != 11 {
		t.Errorf("max_id read by ref after the start's allocation = %d, want 11", got.MaxID)
	}
}
