// Package storetest is the conformance suite every leaf_alloc store passes:
// the same cases run on SQLite, PostgreSQL and MySQL/MariaDB, so that the
// dialects cannot drift apart in the rules that keep IDs unique.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/store"
)

// ExecSQL is implemented, in test builds only (export_test.go), by stores that
// let the suite write rows Create refuses, such as a non-positive step. The
// query has no parameters; the suite quotes its own literals.
type ExecSQL interface {
	ExecSQL(ctx context.Context, query string) error
}

// Run runs the suite. open must return a store on a fresh, migrated, empty
// database (one per call) and close it in t.Cleanup; Run calls it once per
// subtest, and the subtests run in parallel.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"FirstAllocation", testFirstAllocation},
		{"ConcurrentAllocationsDisjoint", testConcurrent},
		{"UnknownTag", testUnknownTag},
		{"Overflow", testOverflow},
		{"BelowMark", testBelowMark},
		{"BadStep", testBadStep},
		{"CustomStep", testCustomStep},
		{"TagsAndRows", testTagsAndRows},
		{"Create", testCreate},
		{"Delete", testDelete},
		{"Tombstone", testTombstone},
		{"Update", testUpdate},
		{"Fence", testFence},
		{"CancelledContext", testCancelled},
		{"Groups", testGroups},
		{"Find", testFind},
		{"ReturnTail", testReturnTail},
		{"Ordered", testOrdered}, // ordered.go
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, open(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func create(t *testing.T, s store.Store, r store.Row) {
	t.Helper()
	if err := s.Create(ctxT(t), r); err != nil {
		t.Fatalf("Create(%+v) = %v, want nil", r, err)
	}
}

// row reads one row back through Rows.
func row(t *testing.T, s store.Store, tag string) store.Row {
	t.Helper()
	rows, err := s.Rows(ctxT(t))
	if err != nil {
		t.Fatalf("Rows() = %v", err)
	}
	for _, r := range rows {
		if r.BizTag == tag {
			return r
		}
	}
	t.Fatalf("Rows() has no row %q", tag)
	return store.Row{}
}

func testFirstAllocation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "leaf-segment-test", MaxID: 1, Step: 2000, Description: "Test leaf Segment Mode Get Id"})
	tests := []struct {
		give store.Allocation
		want store.Allocation
	}{
		{want: store.Allocation{BizTag: "leaf-segment-test", MaxID: 2001, Step: 2000, DBStep: 2000}},
		{want: store.Allocation{BizTag: "leaf-segment-test", MaxID: 4001, Step: 2000, DBStep: 2000}},
	}
	for i, tt := range tests {
		got, err := s.Allocate(ctx, "leaf-segment-test", 0, 0)
		if err != nil || got != tt.want {
			t.Fatalf("allocation %d: Allocate(%q, 0) = %+v, %v, want %+v, nil", i, "leaf-segment-test", got, err, tt.want)
		}
	}
	if got := (store.Allocation{MaxID: 2001, Step: 2000}).Start(); got != 1 {
		t.Errorf("Start() = %d, want 1 (the first ID of a fresh row)", got)
	}
	if got := row(t, s, "leaf-segment-test").MaxID; got != 4001 {
		t.Errorf("max_id after two allocations = %d, want 4001", got)
	}
}

// testConcurrent has 16 allocators take 50 segments each, half of them with a
// custom step, and checks that the segments tile [1, max_id) exactly.
func testConcurrent(t *testing.T, s store.Store) {
	const (
		workers = 16
		each    = 50
		step    = 10
	)
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "concurrent", Step: step})
	var (
		mu     sync.Mutex // guards ranges and errs
		ranges []store.Allocation
		errs   []error
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				custom := int64(0)
				if (w+i)%2 == 1 {
					custom = int64(1 + (w*each+i)%7)
				}
				a, err := s.Allocate(ctx, "concurrent", custom, 0)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					ranges = append(ranges, a)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("Allocate(%q) failed %d times, first: %v", "concurrent", len(errs), errs[0])
	}
	slices.SortFunc(ranges, func(a, b store.Allocation) int { return cmpInt(a.Start(), b.Start()) })
	next := int64(1)
	var total int64
	for _, a := range ranges {
		if a.Start() != next {
			t.Fatalf("segment [%d, %d) follows %d: overlap or gap", a.Start(), a.MaxID, next)
		}
		if a.DBStep != step {
			t.Errorf("Allocate(%q) DBStep = %d, want %d", "concurrent", a.DBStep, step)
		}
		next = a.MaxID
		total += a.Step
	}
	if got, want := row(t, s, "concurrent").MaxID, 1+total; got != want {
		t.Errorf("final max_id = %d, want 1 + %d = %d", got, total, want)
	}
	if len(ranges) != workers*each {
		t.Errorf("got %d segments, want %d", len(ranges), workers*each)
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testUnknownTag(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "known", Step: 100})
	tests := []struct {
		name string
		give func() error
	}{
		{"Allocate", func() error { _, err := s.Allocate(ctx, "unknown", 0, 0); return err }},
		{"AllocateCustom", func() error { _, err := s.Allocate(ctx, "unknown", 500, 0); return err }},
		{"Update", func() error { return s.Update(ctx, "unknown", 100, "") }},
		{"Delete", func() error { return s.Delete(ctx, "unknown") }},
		{"Fence", func() error { _, err := s.Fence(ctx, "unknown", 100); return err }},
	}
	for _, tt := range tests {
		if err := tt.give(); !errors.Is(err, store.ErrTagNotFound) {
			t.Errorf("%s(%q) = %v, want %v", tt.name, "unknown", err, store.ErrTagNotFound)
		}
	}
}

func testOverflow(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const tag = "near-max"
	// Create and Fence refuse a max_id this close to the end (ErrOverflow),
	// so the row is moved there with raw SQL, as a restored or hand-edited
	// table could be.
	ex, ok := s.(ExecSQL)
	if !ok {
		t.Skipf("%T has no ExecSQL test hook (export_test.go); cannot write a max_id near the end", s)
	}
	create(t, s, store.Row{BizTag: tag, MaxID: 1, Step: 2000})
	if err := ex.ExecSQL(ctx, fmt.Sprintf("UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = '%s'", int64(math.MaxInt64-10), tag)); err != nil {
		t.Fatalf("ExecSQL: %v", err)
	}
	before := row(t, s, tag)
	tests := []struct {
		give    int64 // step argument
		wantErr error
		wantMax int64
	}{
		{give: 0, wantErr: store.ErrOverflow, wantMax: math.MaxInt64 - 10},
		{give: 11, wantErr: store.ErrOverflow, wantMax: math.MaxInt64 - 10},
		{give: math.MaxInt64, wantErr: store.ErrOverflow, wantMax: math.MaxInt64 - 10},
		{give: 10, wantMax: math.MaxInt64}, // exactly reaches the maximum
		{give: 1, wantErr: store.ErrOverflow, wantMax: math.MaxInt64},
		{give: 0, wantErr: store.ErrOverflow, wantMax: math.MaxInt64},
	}
	for _, tt := range tests {
		got, err := s.Allocate(ctx, tag, tt.give, 0)
		if !errors.Is(err, tt.wantErr) {
			t.Fatalf("Allocate(%q, %d) = %+v, %v, want %v", tag, tt.give, got, err, tt.wantErr)
		}
		if err != nil && !containsQuoted(err, tag) {
			t.Errorf("Allocate(%q, %d) error %q does not name the tag", tag, tt.give, err)
		}
		after := row(t, s, tag)
		if after.MaxID != tt.wantMax || after.Step != before.Step {
			t.Errorf("after Allocate(%q, %d): row = %+v, want max_id %d step %d", tag, tt.give, after, tt.wantMax, before.Step)
		}
		if tt.wantErr != nil && !after.UpdateTime.Equal(before.UpdateTime) && after.MaxID == before.MaxID {
			t.Errorf("after refused Allocate(%q, %d): update_time %v, want unchanged %v", tag, tt.give, after.UpdateTime, before.UpdateTime)
		}
		before = after
	}
}

// testBelowMark: an allocation with a mark above max_id (a rewound table)
// is refused with ErrBelowMark by the UPDATE itself and leaves the row
// unchanged; a mark at or below max_id, or none (<= 1), allocates. Both
// query forms (the row's step, a custom step) carry the guard.
func testBelowMark(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const tag = "marked"
	create(t, s, store.Row{BizTag: tag, MaxID: 100, Step: 10})
	tests := []struct {
		giveStep, giveMark int64
		wantErr            error
		wantMax            int64 // the row's max_id afterwards
	}{
		{giveStep: 0, giveMark: 101, wantErr: store.ErrBelowMark, wantMax: 100},
		{giveStep: 5, giveMark: 101, wantErr: store.ErrBelowMark, wantMax: 100},
		{giveStep: 0, giveMark: math.MaxInt64, wantErr: store.ErrBelowMark, wantMax: 100},
		{giveStep: 0, giveMark: 100, wantMax: 110}, // at the mark
		{giveStep: 5, giveMark: 110, wantMax: 115},
		{giveStep: 5, giveMark: 116, wantErr: store.ErrBelowMark, wantMax: 115},
		{giveStep: 0, giveMark: 50, wantMax: 125}, // below the mark
		{giveStep: 0, giveMark: 1, wantMax: 135},  // no mark
		{giveStep: 0, giveMark: 0, wantMax: 145},
		{giveStep: 5, giveMark: math.MinInt64, wantMax: 150},
	}
	before := row(t, s, tag)
	for _, tt := range tests {
		got, err := s.Allocate(ctx, tag, tt.giveStep, tt.giveMark)
		if !errors.Is(err, tt.wantErr) {
			t.Fatalf("Allocate(%q, %d, mark %d) = %+v, %v, want %v", tag, tt.giveStep, tt.giveMark, got, err, tt.wantErr)
		}
		after := row(t, s, tag)
		if after.MaxID != tt.wantMax {
			t.Errorf("after Allocate(%q, %d, mark %d): max_id %d, want %d", tag, tt.giveStep, tt.giveMark, after.MaxID, tt.wantMax)
		}
		if err != nil {
			// The refusal names the tag, its max_id and the mark.
			for _, want := range []string{fmt.Sprintf("%q", tag), fmt.Sprint(before.MaxID), fmt.Sprint(tt.giveMark)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Allocate(%q, %d, mark %d) error %q does not name %s", tag, tt.giveStep, tt.giveMark, err, want)
				}
			}
			if after != before {
				t.Errorf("after refused Allocate(%q, %d, mark %d): row = %+v, want unchanged %+v", tag, tt.giveStep, tt.giveMark, after, before)
			}
		} else if got.MaxID != tt.wantMax || got.Start() != before.MaxID {
			t.Errorf("Allocate(%q, %d, mark %d) = %+v, want [%d, %d)", tag, tt.giveStep, tt.giveMark, got, before.MaxID, tt.wantMax)
		}
		before = after
	}

	// A row below 1 (written by hand) still allocates without a mark: the
	// caller cuts its segment at 1.
	ex, ok := s.(ExecSQL)
	if !ok {
		return
	}
	create(t, s, store.Row{BizTag: "zero", MaxID: 1, Step: 10})
	if err := ex.ExecSQL(ctx, "UPDATE leaf_alloc SET max_id = -5 WHERE biz_tag = 'zero'"); err != nil {
		t.Fatalf("ExecSQL: %v", err)
	}
	for _, mark := range []int64{0, 1} {
		if a, err := s.Allocate(ctx, "zero", 0, mark); err != nil || a.MaxID != -5+10*(mark+1) {
			t.Errorf("Allocate(%q, 0, mark %d) on max_id %d = %+v, %v, want max_id %d", "zero", mark, -5+10*mark, a, err, -5+10*(mark+1))
		}
	}
	if a, err := s.Allocate(ctx, "zero", 0, 16); !errors.Is(err, store.ErrBelowMark) {
		t.Errorf("Allocate(%q, 0, mark 16) on max_id 15 = %+v, %v, want %v", "zero", a, err, store.ErrBelowMark)
	}
}

func containsQuoted(err error, tag string) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("%q", tag))
}

func testBadStep(t *testing.T, s store.Store) {
	ex, ok := s.(ExecSQL)
	if !ok {
		t.Skipf("%T has no ExecSQL test hook (export_test.go); cannot write a non-positive step", s)
	}
	ctx := ctxT(t)
	tests := []struct {
		give     string // tag
		giveStep int64  // row step written by raw SQL
		giveArg  int64  // step argument to Allocate
	}{
		{"zero", 0, 0},
		{"negative", -5, 0},
		{"zero-custom", 0, 100},
		{"negative-custom", -5, 100},
	}
	for _, tt := range tests {
		create(t, s, store.Row{BizTag: tt.give, MaxID: 42, Step: 1})
		if err := ex.ExecSQL(ctx, fmt.Sprintf("UPDATE leaf_alloc SET step = %d WHERE biz_tag = '%s'", tt.giveStep, tt.give)); err != nil {
			t.Fatalf("ExecSQL: %v", err)
		}
		before := row(t, s, tt.give)
		got, err := s.Allocate(ctx, tt.give, tt.giveArg, 0)
		if !errors.Is(err, store.ErrBadStep) {
			t.Errorf("Allocate(%q, %d) with row step %d = %+v, %v, want %v", tt.give, tt.giveArg, tt.giveStep, got, err, store.ErrBadStep)
		}
		if after := row(t, s, tt.give); after != before {
			t.Errorf("after refused Allocate(%q, %d): row = %+v, want unchanged %+v", tt.give, tt.giveArg, after, before)
		}
	}
}

func testCustomStep(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "custom", Step: 2000})
	tests := []struct {
		give int64
		want store.Allocation
	}{
		{give: 5000, want: store.Allocation{BizTag: "custom", MaxID: 5001, Step: 5000, DBStep: 2000}},
		{give: 0, want: store.Allocation{BizTag: "custom", MaxID: 7001, Step: 2000, DBStep: 2000}},
		{give: -3, want: store.Allocation{BizTag: "custom", MaxID: 9001, Step: 2000, DBStep: 2000}},
		{give: 1, want: store.Allocation{BizTag: "custom", MaxID: 9002, Step: 1, DBStep: 2000}},
		{give: 4_000_000_000, want: store.Allocation{BizTag: "custom", MaxID: 4_000_009_002, Step: 4_000_000_000, DBStep: 2000}},
	}
	for _, tt := range tests {
		got, err := s.Allocate(ctx, "custom", tt.give, 0)
		if err != nil || got != tt.want {
			t.Errorf("Allocate(%q, %d) = %+v, %v, want %+v, nil", "custom", tt.give, got, err, tt.want)
		}
	}
}

func testTagsAndRows(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tags, err := s.Tags(ctx)
	if err != nil || len(tags) != 0 {
		t.Fatalf("Tags() on an empty table = %q, %v, want [], nil", tags, err)
	}
	start := time.Now()
	want := []store.Row{
		{BizTag: "a-order", MaxID: 1, Step: 1000, Description: "orders"},
		{BizTag: "b-user", MaxID: 500, Step: 10},
		{BizTag: "c-短链", MaxID: 7, Step: 3, Description: "short links, 短链"},
	}
	for _, r := range []store.Row{want[2], want[0], want[1]} {
		create(t, s, r)
	}
	tags, err = s.Tags(ctx)
	if wantTags := []string{"a-order", "b-user", "c-短链"}; err != nil || !slices.Equal(tags, wantTags) {
		t.Errorf("Tags() = %q, %v, want %q, nil", tags, err, wantTags)
	}
	rows, err := s.Rows(ctx)
	if err != nil || len(rows) != len(want) {
		t.Fatalf("Rows() = %+v, %v, want %d rows", rows, err, len(want))
	}
	for i, got := range rows {
		if d := got.UpdateTime.Sub(start); d < -5*time.Minute || d > 5*time.Minute {
			t.Errorf("Rows()[%d].UpdateTime = %v, want about %v (time zone handling?)", i, got.UpdateTime, start)
		}
		got.UpdateTime = time.Time{}
		if got != want[i] {
			t.Errorf("Rows()[%d] = %+v, want %+v", i, got, want[i])
		}
	}
}

func testCreate(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "dup", Step: 5})
	tests := []struct {
		name string
		give store.Row
		want error
	}{
		{"duplicate", store.Row{BizTag: "dup", Step: 7}, store.ErrTagExists},
		{"zero step", store.Row{BizTag: "z", Step: 0}, store.ErrBadStep},
		{"negative step", store.Row{BizTag: "n", Step: -1}, store.ErrBadStep},
		{"step beyond int(11)", store.Row{BizTag: "big", Step: math.MaxInt32 + 1}, store.ErrBadStep},
		{"control character", store.Row{BizTag: "a\x01b", Step: 1}, store.ErrBadRow},
		{"newline", store.Row{BizTag: "a\nb", Step: 1}, store.ErrBadRow},
		{"max_id without room", store.Row{BizTag: "end", MaxID: store.MaxFence + 1, Step: 1}, store.ErrOverflow},
	}
	for _, tt := range tests {
		if err := s.Create(ctx, tt.give); !errors.Is(err, tt.want) {
			t.Errorf("%s: Create(%+v) = %v, want %v", tt.name, tt.give, err, tt.want)
		}
	}
	if got := row(t, s, "dup").Step; got != 5 {
		t.Errorf("after duplicate Create, step = %d, want 5 (unchanged)", got)
	}
	for _, give := range []store.Row{{BizTag: "", Step: 1}, {BizTag: string(make([]byte, store.MaxTagLen+1)), Step: 1}} {
		if err := s.Create(ctx, give); err == nil {
			t.Errorf("Create(tag of %d bytes) = nil, want an error", len(give.BizTag))
		}
	}
	create(t, s, store.Row{BizTag: "zero-max", MaxID: 0, Step: 3})
	if got := row(t, s, "zero-max").MaxID; got != 1 {
		t.Errorf("Create(MaxID 0) stored max_id %d, want 1", got)
	}
	create(t, s, store.Row{BizTag: "max-step", Step: math.MaxInt32})
	if a, err := s.Allocate(ctx, "max-step", 0, 0); err != nil || a.Step != math.MaxInt32 {
		t.Errorf("Allocate(%q, 0) = %+v, %v, want step %d", "max-step", a, err, math.MaxInt32)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "gone", Step: 5})
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatalf("Delete(%q) = %v, want nil", "gone", err)
	}
	if err := s.Delete(ctx, "gone"); !errors.Is(err, store.ErrTagNotFound) {
		t.Errorf("second Delete(%q) = %v, want %v", "gone", err, store.ErrTagNotFound)
	}
	if _, err := s.Allocate(ctx, "gone", 0, 0); !errors.Is(err, store.ErrTagNotFound) {
		t.Errorf("Allocate(%q) after Delete = %v, want %v", "gone", err, store.ErrTagNotFound)
	}
	if tags, err := s.Tags(ctx); err != nil || len(tags) != 0 {
		t.Errorf("Tags() after Delete = %q, %v, want [], nil", tags, err)
	}
}

// testTombstone: a deleted tag leaves its last max_id behind; Create below
// it is refused (store.ErrBelowTombstone, naming the tombstone), at or above
// it succeeds and takes the tombstone out, ForceCreate goes below it and
// says what it overrode; a second delete keeps the higher max_id.
func testTombstone(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "tomb", Step: 1000})
	for range 3 {
		if _, err := s.Allocate(ctx, "tomb", 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now().Add(-time.Minute)
	if err := s.Delete(ctx, "tomb"); err != nil {
		t.Fatalf("Delete(%q) = %v", "tomb", err)
	}
	err := s.Create(ctx, store.Row{BizTag: "tomb", MaxID: 1, Step: 1000})
	var te *store.TombstoneError
	if !errors.Is(err, store.ErrBelowTombstone) || !errors.As(err, &te) {
		t.Fatalf("Create below the tombstone = %v, want %v", err, store.ErrBelowTombstone)
	}
	if te.Tombstone != 3001 || te.MaxID != 1 || te.BizTag != "tomb" || te.DeletedAt.Before(before) || te.DeletedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("TombstoneError = %+v, want tag tomb, max_id 1, tombstone 3001, deleted just now", te)
	}
	if tags, err := s.Tags(ctx); err != nil || len(tags) != 0 {
		t.Errorf("Tags() after a refused Create = %q, %v, want none (rolled back)", tags, err)
	}
	if err := s.Create(ctx, store.Row{BizTag: "tomb", MaxID: 3000, Step: 1000}); !errors.Is(err, store.ErrBelowTombstone) {
		t.Errorf("Create one below the tombstone = %v, want %v", err, store.ErrBelowTombstone)
	}
	// At the tombstone: the new first ID is the old max_id, never handed out.
	create(t, s, store.Row{BizTag: "tomb", MaxID: 3001, Step: 1000})
	if a, err := s.Allocate(ctx, "tomb", 0, 0); err != nil || a.Start() != 3001 {
		t.Errorf("Allocate after re-create = %+v, %v, want a segment from 3001", a, err)
	}
	// The tombstone went with that create: deleted again at 4001, the old
	// 3001 no longer counts, the new max_id does.
	if err := s.Delete(ctx, "tomb"); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, store.Row{BizTag: "tomb", MaxID: 3500, Step: 1000}); !errors.Is(err, store.ErrBelowTombstone) || !strings.Contains(err.Error(), "4001") {
		t.Errorf("Create below the second tombstone = %v, want %v naming 4001", err, store.ErrBelowTombstone)
	}
	overrode, err := s.ForceCreate(ctx, store.Row{BizTag: "tomb", MaxID: 1, Step: 1000})
	if err != nil || overrode != 4001 {
		t.Fatalf("ForceCreate below the tombstone = %d, %v, want 4001, nil", overrode, err)
	}
	if got := row(t, s, "tomb").MaxID; got != 1 {
		t.Errorf("max_id after ForceCreate = %d, want 1", got)
	}
	if _, err := s.ForceCreate(ctx, store.Row{BizTag: "tomb", MaxID: 1, Step: 1000}); !errors.Is(err, store.ErrTagExists) {
		t.Errorf("ForceCreate of an existing tag = %v, want %v", err, store.ErrTagExists)
	}
	// The forced create kept the tombstone of 4001 (so that no server gives a
	// tail of the old row back into the new one, ReturnTail): deleted again at
	// max_id 1, the tag is still refused below 4001, and served at it.
	if err := s.Delete(ctx, "tomb"); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, store.Row{BizTag: "tomb", MaxID: 1, Step: 1000}); !errors.Is(err, store.ErrBelowTombstone) || !strings.Contains(err.Error(), "4001") {
		t.Errorf("Create below the tombstone a forced create kept = %v, want %v naming 4001", err, store.ErrBelowTombstone)
	}
	create(t, s, store.Row{BizTag: "tomb", MaxID: 4001, Step: 1000})
	if overrode, err := s.ForceCreate(ctx, store.Row{BizTag: "fresh", Step: 5}); err != nil || overrode != 0 {
		t.Errorf("ForceCreate of a tag never deleted = %d, %v, want 0, nil", overrode, err)
	}
	// A tombstone belongs to its exact name.
	create(t, s, store.Row{BizTag: "Case", Step: 5})
	if _, err := s.Allocate(ctx, "Case", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "Case"); err != nil {
		t.Fatal(err)
	}
	create(t, s, store.Row{BizTag: "case", Step: 5})
}

func testUpdate(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "upd", Step: 5, Description: "old"})
	if _, err := s.Allocate(ctx, "upd", 0, 0); err != nil {
		t.Fatalf("Allocate(%q) = %v", "upd", err)
	}
	tests := []struct {
		giveStep int64
		giveDesc string
		wantErr  error
		want     store.Row
	}{
		{giveStep: 50, giveDesc: "new", want: store.Row{BizTag: "upd", MaxID: 6, Step: 50, Description: "new"}},
		{giveStep: 50, giveDesc: "new", want: store.Row{BizTag: "upd", MaxID: 6, Step: 50, Description: "new"}}, // unchanged values still match the row
		{giveStep: 7, giveDesc: "", want: store.Row{BizTag: "upd", MaxID: 6, Step: 7}},
		{giveStep: 0, giveDesc: "x", wantErr: store.ErrBadStep, want: store.Row{BizTag: "upd", MaxID: 6, Step: 7}},
		{giveStep: -1, giveDesc: "x", wantErr: store.ErrBadStep, want: store.Row{BizTag: "upd", MaxID: 6, Step: 7}},
	}
	for _, tt := range tests {
		err := s.Update(ctx, "upd", tt.giveStep, tt.giveDesc)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("Update(%q, %d, %q) = %v, want %v", "upd", tt.giveStep, tt.giveDesc, err, tt.wantErr)
		}
		got := row(t, s, "upd")
		got.UpdateTime = time.Time{}
		if got != tt.want {
			t.Errorf("after Update(%q, %d, %q): row = %+v, want %+v", "upd", tt.giveStep, tt.giveDesc, got, tt.want)
		}
	}
	if a, err := s.Allocate(ctx, "upd", 0, 0); err != nil || a.Step != 7 || a.DBStep != 7 || a.MaxID != 13 {
		t.Errorf("Allocate(%q) after Update = %+v, %v, want step 7, max_id 13", "upd", a, err)
	}
}

func testFence(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	create(t, s, store.Row{BizTag: "fence", MaxID: 1000, Step: 10})
	tests := []struct {
		give int64
		want int64
	}{
		{give: 5000, want: 5000},
		{give: 4000, want: 5000}, // never lowers
		{give: 5000, want: 5000},
		{give: -1, want: 5000},
		{give: store.MaxFence, want: store.MaxFence},
	}
	for _, tt := range tests {
		got, err := s.Fence(ctx, "fence", tt.give)
		if err != nil || got.MaxID != tt.want || got.BizTag != "fence" || got.Step != 10 {
			t.Errorf("Fence(%q, %d) = %+v, %v, want max_id %d", "fence", tt.give, got, err, tt.want)
		}
		if r := row(t, s, "fence"); r.MaxID != tt.want {
			t.Errorf("after Fence(%q, %d): max_id = %d, want %d", "fence", tt.give, r.MaxID, tt.want)
		}
	}
	// A fence that would leave no room for a segment is refused, row unchanged.
	if got, err := s.Fence(ctx, "fence", math.MaxInt64); !errors.Is(err, store.ErrOverflow) {
		t.Errorf("Fence(%q, MaxInt64) = %+v, %v, want %v", "fence", got, err, store.ErrOverflow)
	}
	if r := row(t, s, "fence"); r.MaxID != store.MaxFence {
		t.Errorf("after a refused Fence: max_id = %d, want %d", r.MaxID, int64(store.MaxFence))
	}
	create(t, s, store.Row{BizTag: "fence2", MaxID: 1, Step: 10})
	if _, err := s.Fence(ctx, "fence2", 5000); err != nil {
		t.Fatalf("Fence(%q, 5000) = %v", "fence2", err)
	}
	if a, err := s.Allocate(ctx, "fence2", 0, 0); err != nil || a.Start() != 5000 {
		t.Errorf("Allocate(%q) after Fence(5000) = %+v, %v, want the segment [5000, 5010)", "fence2", a, err)
	}
	// MaxID reads the max_id the segment generator matches with a tail
	// return after an allocation refused below its mark.
	if v, err := s.MaxID(ctx, "fence2"); err != nil || v != 5010 {
		t.Errorf("MaxID(%q) = %d, %v, want 5010", "fence2", v, err)
	}
	if v, err := s.MaxID(ctx, "no-such-tag"); !errors.Is(err, store.ErrTagNotFound) {
		t.Errorf("MaxID(%q) = %d, %v, want %v", "no-such-tag", v, err, store.ErrTagNotFound)
	}
}

func testCancelled(t *testing.T, s store.Store) {
	create(t, s, store.Row{BizTag: "c", Step: 5})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Allocate(ctx, "c", 0, 0); err == nil || errors.Is(err, store.ErrTagNotFound) {
		t.Errorf("Allocate(cancelled ctx) = %v, want a context error", err)
	}
	if got := row(t, s, "c").MaxID; got != 1 {
		t.Errorf("max_id after cancelled Allocate = %d, want 1", got)
	}
}
