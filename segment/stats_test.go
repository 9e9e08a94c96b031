package segment_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/segment"
)

// TestStatsView: Stats shows Leaf's /cache columns (init, next, pos, both
// segments) plus what a rate and a runway need.
func TestStatsView(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "v", 1, 100)
	db.Create(t, "idle", 1, 100)
	g := newGen(t, db.Store, segment.Config{Clock: clocktest.New(t0)})

	if st, ok := statsOf(g, "idle"); !ok || st.InitOK || st.Issued != 0 {
		t.Fatalf("Stats of an unused tag = %+v, %v; want cached, not initialised", st, ok)
	}
	mustGet(t, g, "v")
	st, _ := statsOf(g, "v")
	want := segment.SegmentStats{Value: 2, Max: 101, Step: 100}
	if !st.InitOK || st.NextReady || st.Pos != 0 || st.Segments[0] != want || st.Issued != 1 || st.Remaining != 99 {
		t.Fatalf("Stats after 1 ID = %+v, want init, pos 0, segment %+v, issued 1, remaining 99", st, want)
	}
	if !st.LastLoad.Equal(t0) || st.Step != 100 || st.MinStep != 100 {
		t.Fatalf("Stats LastLoad %v Step %d MinStep %d, want %v, 100, 100", st.LastLoad, st.Step, st.MinStep, t0)
	}
	for range 10 {
		mustGet(t, g, "v")
	}
	st = waitNextReady(t, g, "v")
	if want := (segment.SegmentStats{Value: 101, Max: 201, Step: 100}); st.Segments[1] != want || st.Remaining != 189 {
		t.Fatalf("Stats with next ready = %+v, want Segments[1] %+v, remaining 189", st, want)
	}
	for range 90 {
		mustGet(t, g, "v")
	}
	st, _ = statsOf(g, "v")
	// switched: pos 1; slot 0 shows the spent segment, as Leaf's /cache
	// does (the buffer keeps its bounds, not the segment)
	spent := segment.SegmentStats{Value: 101, Max: 101, Step: 100}
	if st.Pos != 1 || st.NextReady || st.Segments[1].Value != 102 || st.Segments[0] != spent || st.Issued != 101 {
		t.Fatalf("Stats after the switch = %+v, want pos 1, Segments[1].Value 102, Segments[0] %+v (spent), issued 101", st, spent)
	}
	if got := g.Stats(); len(got) != 2 || got[0].BizTag != "idle" || got[1].BizTag != "v" {
		t.Fatalf("Stats() tags = %v, want [idle v] sorted", got)
	}
	// EachStat walks the same snapshots in any order and stops when asked.
	seen := map[string]segment.BufferStats{}
	g.EachStat(func(s *segment.BufferStats) bool { seen[s.BizTag] = *s; return true })
	for _, want := range g.Stats() {
		if got, ok := seen[want.BizTag]; !ok || got != want {
			t.Fatalf("EachStat(%s) = %+v, %v; want %+v as Stats has it", want.BizTag, got, ok, want)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("EachStat saw %d tags, want 2", len(seen))
	}
	calls := 0
	g.EachStat(func(*segment.BufferStats) bool { calls++; return false })
	if calls != 1 {
		t.Fatalf("EachStat went on after false: %d calls, want 1", calls)
	}
}

// TestCloseLeavesNoGoroutine: after Close the generator's refresh loop and
// loads are gone (TestMain checks the whole package again at the end).
func TestCloseLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "l", 1, 10)
	g, err := segment.New(context.Background(), db.Store, segment.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 55 { // several prefetches
		mustGet(t, g, "l")
	}
	g.Close()
	db.Store.Close()
	db.Raw.Close()
}
