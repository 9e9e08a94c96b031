package segment_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/segment"
)

// tailGen starts a generator on db with a marks log in dir and tail return
// on (issue 22 item 2).
func tailGen(t *testing.T, db *testDB, dir string) *segment.Generator {
	t.Helper()
	cfg := fastRetry
	cfg.Marks = segment.NewLogMarks(filepath.Join(dir, "segment-marks.log"), "", nil)
	cfg.Tails = db.Store
	return newGen(t, db.Store, cfg)
}

// returnTails stops g as leaf-server's graceful stop does: it waits for the
// loads in flight (a prefetch started by the last Gets), closes g and gives
// its tails back. Without the wait, Close may cancel a prefetch whose
// allocation committed, and the compare-and-set then misses (safe, but not
// what these tests check).
func returnTails(t *testing.T, g *segment.Generator, between func(string)) segment.TailStats {
	t.Helper()
	if err := g.WaitLoads(context.Background()); err != nil {
		t.Fatalf("WaitLoads: %v", err)
	}
	g.Close()
	st, err := g.ReturnTails(context.Background(), between)
	if err != nil {
		t.Fatalf("ReturnTails: %v", err)
	}
	return st
}

// TestTailReturnNoGap: a server stopped gracefully and started again
// continues at the next ID when no one else allocated meanwhile, with the
// next segment buffered (the tail runs to its end) and without.
func TestTailReturnNoGap(t *testing.T) {
	t.Parallel()
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "nogap", 1, 100)
			dir := t.TempDir()
			want := int64(1)
			for round, take := range []int{5, 150, 37} { // 150: a prefetched next segment
				g := tailGen(t, db, dir)
				for range take {
					if id := mustGet(t, g, "nogap"); id != want {
						t.Fatalf("round %d: ID %d, want %d (no gap)", round, id, want)
					}
					want++
				}
				if take > 100 {
					waitNextReady(t, g, "nogap")
				}
				st := returnTails(t, g, nil)
				if st.Tags != 1 || st.Missed != 0 {
					t.Fatalf("round %d: ReturnTails = %+v, want 1 tag given back", round, st)
				}
				if got := db.MaxID(t, "nogap"); got != want {
					t.Fatalf("round %d: max_id after the return = %d, want the next ID %d", round, got, want)
				}
			}
		})
	}
}

// TestTailReturnAfterOtherAllocation: an allocation after ours (a plain SQL
// client, another server, a Java Leaf) turns the compare-and-set into a
// no-op; the lowered mark still lets the restarted server serve, above
// every ID handed out.
func TestTailReturnAfterOtherAllocation(t *testing.T) {
	t.Parallel()
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "cas", 1, 100)
			dir := t.TempDir()
			g := tailGen(t, db, dir)
			seen := map[int64]bool{}
			for range 5 {
				seen[mustGet(t, g, "cas")] = true
			}
			// Between the stop of issuing and the compare-and-set, a plain
			// SQL client allocates [101, 201).
			db.Exec(t, "UPDATE leaf_alloc SET max_id = max_id + 100 WHERE biz_tag = 'cas'")
			st := returnTails(t, g, nil)
			if st.Tags != 0 || st.Missed != 1 {
				t.Fatalf("ReturnTails = %+v, want the tail kept (missed)", st)
			}
			if got := db.MaxID(t, "cas"); got != 201 {
				t.Fatalf("max_id = %d, want 201 untouched", got)
			}
			g2 := tailGen(t, db, dir)
			id := mustGet(t, g2, "cas")
			if id != 201 || seen[id] {
				t.Fatalf("first ID after restart = %d, want 201 (above the SQL client's segment)", id)
			}
		})
	}
}

// TestTailReturnNextNotContiguous: when another allocation lies between the
// current and the next segment, only the next segment is given back; the
// rest of the current one is skipped (it lies below the other segment).
func TestTailReturnNextNotContiguous(t *testing.T) {
	t.Parallel()
	db := openDB(t, postgresDB.dsn(t))
	db.Create(t, "gap", 1, 100)
	g := tailGen(t, db, t.TempDir())
	for range 10 { // within the first 10%: no prefetch yet
		mustGet(t, g, "gap")
	}
	db.Exec(t, "UPDATE leaf_alloc SET max_id = max_id + 100 WHERE biz_tag = 'gap'") // [101, 201)
	mustGet(t, g, "gap")                                                            // starts the prefetch: [201, 301)
	waitNextReady(t, g, "gap")
	st := returnTails(t, g, nil)
	if st.Tags != 1 || st.IDs != 100 {
		t.Fatalf("ReturnTails = %+v, want 1 tag, 100 IDs (the next segment only)", st)
	}
	if got := db.MaxID(t, "gap"); got != 201 {
		t.Fatalf("max_id = %d, want 201: the other segment [101, 201) must stay taken", got)
	}
}

// TestTailReturnKilledBetween: the mark is lowered first; a stop between the
// two steps (here: the compare-and-set fails) leaves max_id where it was and
// the restarted server serves above it, never below.
func TestTailReturnKilledBetween(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "kill", 1, 100)
	dir := t.TempDir()
	g := tailGen(t, db, dir)
	for range 5 {
		mustGet(t, g, "kill")
	}
	g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	_, err := g.ReturnTails(ctx, func(string) { cancel() }) // the "kill"
	if err == nil {
		t.Fatal("ReturnTails with its context cancelled between the steps = nil error")
	}
	if got := db.MaxID(t, "kill"); got != 101 {
		t.Fatalf("max_id = %d, want 101 (not lowered)", got)
	}
	m, err := segment.ReadMarksLog(filepath.Join(dir, "segment-marks.log"))
	if err != nil || m["kill"] != 6 {
		t.Fatalf("mark on disk = %d, %v, want 6 (lowered first)", m["kill"], err)
	}
	g2 := tailGen(t, db, dir)
	if id := mustGet(t, g2, "kill"); id != 101 {
		t.Fatalf("first ID after restart = %d, want 101", id)
	}
}

// TestTailReturnOtherServerAccepts: a server whose mark (read from the
// table) lies in the tail another server gave back serves from the returned
// tail instead of refusing it as a rewind; once it took the return in, a
// real rewind into the same tail (a restored backup) is refused again.
func TestTailReturnOtherServerAccepts(t *testing.T) {
	t.Parallel()
	for _, k := range []dbKind{postgresDB, mysqlDB} {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "share", 1, 100)
			a := tailGen(t, db, t.TempDir())
			b := tailGen(t, db, t.TempDir())
			seen := map[int64]bool{}
			take := func(g *segment.Generator) int64 {
				t.Helper()
				id := mustGet(t, g, "share")
				if seen[id] {
					t.Fatalf("ID %d handed out twice", id)
				}
				seen[id] = true
				return id
			}
			take(b) // b: [1, 101)
			for range 5 {
				take(a) // a: [101, 201)
			}
			if err := b.Refresh(context.Background()); err != nil { // b's mark: 201
				t.Fatal(err)
			}
			if st, _ := statsOf(b, "share"); st.HighWater != 201 {
				t.Fatalf("b's mark = %d, want 201 read from the table", st.HighWater)
			}
			if st := returnTails(t, a, nil); st.Tags != 1 {
				t.Fatalf("a's ReturnTails = %+v, want its tail given back", st)
			}
			if got := db.MaxID(t, "share"); got != 106 {
				t.Fatalf("max_id = %d, want 106", got)
			}
			for range 99 {
				take(b) // the rest of b's segment (its prefetch meets the return)
			}
			if id := take(b); id < 106 || id >= 201 {
				t.Fatalf("b's ID after a's return = %d, want one of the returned tail [106, 201)", id)
			}
			if st, _ := statsOf(b, "share"); st.Refusing {
				t.Fatalf("b refuses the tag after a's return: %+v", st)
			}
			// A backup from just after the return is restored.
			db.Exec(t, "UPDATE leaf_alloc SET max_id = 106 WHERE biz_tag = 'share'")
			for {
				_, err := b.Get(context.Background(), "share")
				if errors.Is(err, segment.ErrRewound) {
					break
				}
				if err != nil {
					t.Fatalf("Get after the restore = %v, want ErrRewound once the segment is spent", err)
				}
			}
		})
	}
}

// TestTailReturnFreshServer: a server that starts with no mark for a tag
// another server gave a tail of back records the return at its first
// refresh (it used to try to write a mark of 0 for it, which the marks log
// refuses: a false "tail return not applied" warning, and the return stayed
// unrecorded). Recorded, the return is never used later to lower the mark
// this server got since: a backup restored into the returned tail, below
// IDs this server handed out from it, is refused, not served again.
func TestTailReturnFreshServer(t *testing.T) {
	t.Parallel()
	for _, k := range allDBs {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "fresh", 1, 100)
			a := tailGen(t, db, t.TempDir())
			for range 5 {
				mustGet(t, a, "fresh") // [1, 101), 1..5 handed out
			}
			if st := returnTails(t, a, nil); st.Tags != 1 {
				t.Fatalf("a's ReturnTails = %+v, want its tail given back", st)
			}
			// c's segments lie inside the returned tail [6, 101).
			db.Exec(t, "UPDATE leaf_alloc SET step = 50 WHERE biz_tag = 'fresh'")
			var logs syncBuffer
			cfg := fastRetry
			cfg.Marks = segment.NewLogMarks(filepath.Join(t.TempDir(), "segment-marks.log"), "", nil)
			cfg.Tails = db.Store
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			c := newGen(t, db.Store, cfg) // no mark for "fresh"; its first refresh sees the return
			if err := c.Refresh(context.Background()); err != nil {
				t.Fatalf("c's refresh: %v", err)
			}
			if strings.Contains(logs.String(), "not applied") {
				t.Errorf("c, without a mark, warned about the return:\n%s", logs.String())
			}
			seen := map[int64]bool{}
			for range 30 {
				id := mustGet(t, c, "fresh") // [6, 56)
				if id < 6 || seen[id] {
					t.Fatalf("c handed out %d (IDs below 6 were a's; seen before: %v)", id, seen[id])
				}
				seen[id] = true
			}
			// A backup from when max_id was 30 is restored: inside the
			// returned tail, below c's IDs 30..35.
			db.Exec(t, "UPDATE leaf_alloc SET max_id = 30 WHERE biz_tag = 'fresh'")
			if err := c.Refresh(context.Background()); err != nil {
				t.Fatalf("c's refresh after the restore: %v", err)
			}
			for {
				id, err := c.Get(context.Background(), "fresh")
				if errors.Is(err, segment.ErrRewound) {
					break
				}
				if err != nil {
					t.Fatalf("Get after the restore = %v, want ErrRewound once the segment is spent", err)
				}
				if seen[id] {
					t.Fatalf("c handed out %d twice: the old return lowered its mark below IDs it had served", id)
				}
				seen[id] = true
			}
		})
	}
}
