package group_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/bizno"
	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
)

// groupServer is one "server" of a grouped-tag test: a generator and its
// Groups on a shared database, with a clock and a data directory of its own.
type groupServer struct {
	gen   *segment.Generator
	gs    *group.Groups
	clock *clocktest.Clock
	dir   string
}

func startGroupServer(t *testing.T, d *testDB, clock *clocktest.Clock, dir string) *groupServer {
	t.Helper()
	gen, err := segment.New(context.Background(), d.Store, segment.Config{
		Marks:  segment.NewFileMarks(filepath.Join(dir, "segment-marks.json")),
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	gs, err := group.New(context.Background(), gen, d.Store, group.Config{
		PeriodsPath: filepath.Join(dir, "group-periods.json"),
		Clock:       clock,
		Tick:        time.Hour, // the test calls Prepare itself
	})
	if err != nil {
		gen.Close()
		t.Fatalf("group.New: %v", err)
	}
	s := &groupServer{gen: gen, gs: gs, clock: clock, dir: dir}
	t.Cleanup(s.stop)
	return s
}

// stop closes the server (idempotent).
func (s *groupServer) stop() {
	s.gs.Close()
	s.gen.Close()
}

func declare(t *testing.T, gs *group.Groups, d store.Group) {
	t.Helper()
	if err := gs.Declare(context.Background(), d); err != nil {
		t.Fatalf("Declare(%+v) = %v", d, err)
	}
}

func TestGroupFormatted(t *testing.T) {
	for _, db := range allDBs {
		t.Run(db.name, func(t *testing.T) {
			d := openDB(t, db.dsn(t))
			clock := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			s := startGroupServer(t, d, clock, t.TempDir())
			declare(t, s.gs, store.Group{BizTag: "order", Grp: "day", TimeZone: "UTC", Format: "ORD{yyyyMMdd}{seq:6}", Step: 100})
			tpl, _ := bizno.Parse("ORD{yyyyMMdd}{seq:6}", bizno.Day)
			seen := map[string]bool{}
			for _, n := range []int{1, 99, 150} {
				ids, err := s.gs.Next(context.Background(), "order", n, nil)
				if err != nil || len(ids) != n {
					t.Fatalf("Next(order, %d) = %d IDs, %v", n, len(ids), err)
				}
				for _, id := range ids {
					if seen[id] {
						t.Fatalf("ID %s handed out twice", id)
					}
					seen[id] = true
					if !strings.HasPrefix(id, "ORD20261201") || len(id) != len("ORD20261201")+6 {
						t.Fatalf("ID %q, want ORD20261201 and 6 digits", id)
					}
					p, err := tpl.Parse(id)
					if err != nil || p.Start(time.UTC) != time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) || p.Seq < 1 {
						t.Fatalf("Parse(%q) = %+v, %v", id, p, err)
					}
				}
			}
			if len(seen) != 250 {
				t.Fatalf("%d distinct IDs, want 250", len(seen))
			}
			if got := d.MaxID(t, "order:20261201"); got < 251 {
				t.Fatalf("max_id of order:20261201 = %d, want >= 251", got)
			}
			if _, err := s.gen.Get(context.Background(), "order"); !errors.Is(err, segment.ErrTagNotFound) {
				t.Fatalf("plain Get(order) = %v, want ErrTagNotFound (no plain row)", err)
			}
			if v, err := s.gs.NextInt(context.Background(), "order"); !errors.Is(err, group.ErrNotNumeric) {
				t.Fatalf("NextInt(ORD…) = %d, %v, want ErrNotNumeric", v, err)
			}
		})
	}
}

func TestGroupNumeric(t *testing.T) {
	d := openDB(t, sqliteDB.dsn(t))
	clock := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	s := startGroupServer(t, d, clock, t.TempDir())
	declare(t, s.gs, store.Group{BizTag: "inv", Grp: "month", TimeZone: "UTC", Format: "{yyyyMM}{seq:6}", Step: 10})
	a, err := s.gs.NextInt(context.Background(), "inv")
	if err != nil || a != 202612000001 {
		t.Fatalf("NextInt = %d, %v, want 202612000001", a, err)
	}
	clock.Set(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	b, err := s.gs.NextInt(context.Background(), "inv")
	if err != nil || b != 202701000001 {
		t.Fatalf("NextInt in January = %d, %v, want 202701000001", b, err)
	}
}

// TestGroupWidthOverflow: past the width's capacity the tag refuses, and
// the IDs before it are all distinct.
func TestGroupWidthOverflow(t *testing.T) {
	d := openDB(t, sqliteDB.dsn(t))
	clock := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	s := startGroupServer(t, d, clock, t.TempDir())
	declare(t, s.gs, store.Group{BizTag: "tiny", Grp: "day", TimeZone: "UTC", Format: "T{yyyyMMdd}{seq:2}", Step: 7})
	ids, err := s.gs.Next(context.Background(), "tiny", 99, nil)
	if err != nil || len(ids) != 99 || ids[98] != "T2026120199" {
		t.Fatalf("Next(99) = %d IDs (last %v), %v", len(ids), ids[len(ids)-1:], err)
	}
	got, err := s.gs.Next(context.Background(), "tiny", 1, nil)
	if !errors.Is(err, bizno.ErrWidth) || len(got) != 0 {
		t.Fatalf("Next past the width = %v, %v, want ErrWidth and no ID", got, err)
	}
	// The next day starts again at 1.
	clock.Add(24 * time.Hour)
	if got, err := s.gs.Next(context.Background(), "tiny", 1, nil); err != nil || got[0] != "T2026120201" {
		t.Fatalf("Next the next day = %v, %v, want T2026120201", got, err)
	}
}

// TestGroupBoundary is the acceptance run of issue 14 on each database: two
// servers whose clocks differ by 2 s cross midnight in America/Santiago on
// the day whose midnight daylight saving skips (6 September 2026), then the
// month end (30 September → 1 October); server A is stopped abruptly at the
// boundary and restarted with its clock 5 s back across midnight. Every ID
// is distinct, and no server issues a period after a later one.
func TestGroupBoundary(t *testing.T) {
	loc, err := time.LoadLocation("America/Santiago")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	for _, db := range allDBs {
		t.Run(db.name, func(t *testing.T) {
			d := openDB(t, db.dsn(t))
			tpl, _ := bizno.Parse("{yyyyMMdd}{seq:8}", bizno.Day)
			startA := time.Date(2026, 9, 5, 23, 59, 50, 0, loc)
			clockA, clockB := clocktest.New(startA), clocktest.New(startA.Add(-2*time.Second))
			dirA, dirB := t.TempDir(), t.TempDir()
			a := startGroupServer(t, d, clockA, dirA)
			b := startGroupServer(t, d, clockB, dirB)
			declare(t, a.gs, store.Group{BizTag: "ord", Grp: "day", TimeZone: "America/Santiago", Format: "{yyyyMMdd}{seq:8}", Step: 50})
			if err := b.gs.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}

			var mu sync.Mutex
			seen := map[string]string{} // ID → server
			last := map[string]string{} // server → latest period issued
			take := func(name string, s *groupServer, n int) {
				t.Helper()
				ids, err := s.gs.Next(context.Background(), "ord", n, nil)
				if err != nil {
					t.Fatalf("%s Next at %v: %v", name, s.clock.Now(), err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, id := range ids {
					if by, dup := seen[id]; dup {
						t.Fatalf("ID %s handed out by %s and %s", id, by, name)
					}
					seen[id] = name
					if _, err := tpl.Parse(id); err != nil {
						t.Fatalf("Parse(%s) = %v", id, err)
					}
					key := id[:8]
					if key < last[name] {
						t.Fatalf("%s issued period %s after %s", name, key, last[name])
					}
					last[name] = key
				}
			}
			// Each step: both servers' clocks move 1 s; both take IDs,
			// concurrently, across the DST midnight.
			run := func(steps int) {
				for range steps {
					clockA.Add(time.Second)
					clockB.Add(time.Second)
					var wg sync.WaitGroup
					for _, sv := range []struct {
						name string
						s    *groupServer
					}{{"A", a}, {"B", b}} {
						wg.Add(1)
						go func() { defer wg.Done(); take(sv.name, sv.s, 7) }()
					}
					wg.Wait()
				}
			}
			run(15) // A passes midnight at step 10, B at step 12
			if last["A"] != "20260906" || last["B"] != "20260906" {
				t.Fatalf("periods after the DST midnight: %v, want 20260906", last)
			}
			// Stop A abruptly (no Close: its goroutines are left to the
			// cleanup, the data directory is what a kill -9 leaves) and
			// restart it with the clock 5 s back, before midnight.
			a.gs.Close()                                                              // stops the background loop only; no state flushed
			midnight := bizno.Day.Start(time.Date(2026, 9, 6, 12, 0, 0, 0, loc), loc) // 01:00 -03, the transition
			clockA.Set(midnight.Add(-5 * time.Second))
			if k := bizno.Day.Key(bizno.Day.Start(clockA.Now(), loc)); k != "20260905" {
				t.Fatalf("restarted clock reads period %s, want 20260905", k)
			}
			a.gen.Close()
			a = startGroupServer(t, d, clockA, dirA)
			take("A", a, 20)
			if last["A"] != "20260906" {
				t.Fatalf("after the restart with the clock back A issued %s, want 20260906", last["A"])
			}
			// A clock stepped back 5 s across midnight while running.
			clockB.Add(-5 * time.Second)
			if k := bizno.Day.Key(bizno.Day.Start(clockB.Now(), loc)); k != "20260905" {
				t.Fatalf("stepped-back clock reads period %s, want 20260905", k)
			}
			take("B", b, 20)
			if last["B"] != "20260906" {
				t.Fatalf("after the step back B issued %s, want 20260906", last["B"])
			}
			// Month end: 30 September 23:59:50 → 1 October, B 2 s behind.
			clockA.Set(time.Date(2026, 9, 30, 23, 59, 50, 0, loc))
			clockB.Set(clockA.Now().Add(-2 * time.Second))
			a.gs.Prepare(context.Background()) // the row of 1 October ahead of time
			run(15)
			if last["A"] != "20261001" || last["B"] != "20261001" {
				t.Fatalf("periods after the month end: %v, want 20261001", last)
			}
			periods, err := a.gs.Periods(context.Background(), "ord")
			if err != nil || len(periods) != 4 {
				t.Fatalf("Periods = %+v, %v, want 4 (0905, 0906, 0930, 1001)", periods, err)
			}
			t.Logf("%d IDs, 0 duplicates; periods %v", len(seen), periods)
		})
	}
}

// TestGroupPrune: a pruned period is never served again, not even by a
// server with an empty data directory whose clock reads it; the current
// period cannot be pruned; retention keeps the last N periods.
func TestGroupPrune(t *testing.T) {
	d := openDB(t, sqliteDB.dsn(t))
	clockA := clocktest.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	a := startGroupServer(t, d, clockA, t.TempDir())
	declare(t, a.gs, store.Group{BizTag: "p", Grp: "day", TimeZone: "UTC", Format: "P{yyyyMMdd}{seq:4}", Step: 10, Retention: 2})
	for range 3 {
		if _, err := a.gs.Next(context.Background(), "p", 1, nil); err != nil {
			t.Fatal(err)
		}
		clockA.Add(24 * time.Hour)
	}
	// Now 3 December; periods 30 Nov, 1 and 2 Dec exist.
	if _, err := a.gs.Prune(context.Background(), "p", "20261204"); !errors.Is(err, group.ErrDecl) {
		t.Fatalf("Prune(past today) = %v, want ErrDecl", err)
	}
	if key, _ := a.gs.RetentionKey("p", clockA.Now()); key != "20261202" {
		t.Fatalf("RetentionKey = %s, want 20261202 (keep 2 periods: 2 and 3 Dec)", key)
	}
	a.gs.PruneRetention(context.Background())
	ps, err := a.gs.Periods(context.Background(), "p")
	if err != nil || len(ps) != 1 || ps[0].Key != "20261202" {
		t.Fatalf("Periods after retention = %+v, %v, want only 20261202", ps, err)
	}
	// A fresh server whose clock reads 1 December must refuse, not
	// re-create the deleted row and repeat P20261201000x.
	clockB := clocktest.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	b := startGroupServer(t, d, clockB, t.TempDir())
	if ids, err := b.gs.Next(context.Background(), "p", 1, nil); !errors.Is(err, group.ErrPruned) {
		t.Fatalf("Next on a pruned period = %v, %v, want ErrPruned", ids, err)
	}
	clockB.Add(24 * time.Hour)
	if ids, err := b.gs.Next(context.Background(), "p", 1, nil); err != nil || ids[0] != "P202612020011" {
		t.Fatalf("Next on 2 December = %v, %v, want P202612020011 (A holds 1..10)", ids, err)
	}
}

// TestGroupDeclareRefuses: names that collide with leaf_alloc rows, bad
// declarations, and changes of group or format.
func TestGroupDeclareRefuses(t *testing.T) {
	d := openDB(t, sqliteDB.dsn(t))
	s := startGroupServer(t, d, clocktest.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), t.TempDir())
	d.Create(t, "plain", 1, 10)
	d.Create(t, "old:20250101", 1, 10)
	ok := store.Group{BizTag: "g", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10}
	for _, bad := range []store.Group{
		{BizTag: "plain", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10},
		{BizTag: "old", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10},
		{BizTag: "a:b", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10},
		{BizTag: strings.Repeat("x", 120), Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10},
		{BizTag: "g", Grp: "day", TimeZone: "Local", Format: "{yyyyMMdd}{seq:6}", Step: 10},
		{BizTag: "g", Grp: "month", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10},
		{BizTag: "g", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 0},
		{BizTag: "g", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10, Retention: -1},
	} {
		if err := s.gs.Declare(context.Background(), bad); !errors.Is(err, group.ErrDecl) {
			t.Errorf("Declare(%+v) = %v, want ErrDecl", bad, err)
		}
	}
	declare(t, s.gs, ok)
	if err := s.gs.Declare(context.Background(), ok); !errors.Is(err, store.ErrTagExists) {
		t.Fatalf("Declare twice = %v, want ErrTagExists", err)
	}
	for _, ch := range []store.Group{
		{BizTag: "g", Grp: "month", TimeZone: "UTC", Format: "{yyyyMM}{seq:6}", Step: 10},
		{BizTag: "g", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}1{seq:5}", Step: 10},
	} {
		if err := s.gs.Update(context.Background(), ch); !errors.Is(err, group.ErrDecl) {
			t.Errorf("Update(%+v) = %v, want ErrDecl", ch, err)
		}
	}
	gst := d.Store
	for _, tt := range []struct {
		give string
		want bool
	}{{"g", true}, {"g:20261201", true}, {"g:202612", true}, {"g:x", false}, {"gg:20261201", false}, {"other", false}} {
		err := group.CheckPlainTag(context.Background(), gst, tt.give)
		if got := errors.Is(err, group.ErrPeriodRow); got != tt.want {
			t.Errorf("CheckPlainTag(%q) = %v, want refused %v", tt.give, err, tt.want)
		}
	}
}

// TestGroupPeriodMarksFile: a damaged period high-water file stops the
// start, and a mark that cannot be stored refuses the new period (no ID is
// handed out whose period a restart could forget).
func TestGroupPeriodMarksFile(t *testing.T) {
	d := openDB(t, sqliteDB.dsn(t))
	gen := newGen(t, d.Store, segment.Config{})
	dir := t.TempDir()
	bad := filepath.Join(dir, "damaged.json")
	if err := os.WriteFile(bad, []byte(`{"periods":{"ord":"2026120`), 0o644); err != nil {
		t.Fatal(err)
	}
	if gs, err := group.New(context.Background(), gen, d.Store, group.Config{PeriodsPath: bad}); err == nil {
		gs.Close()
		t.Fatal("group.New with a damaged period file = nil error, want a refusal")
	}
	// The file's folder does not exist at start (no marks yet); then a
	// plain file takes its name, so every write fails.
	sub := filepath.Join(dir, "sub")
	clock := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	gs, err := group.New(context.Background(), gen, d.Store, group.Config{
		PeriodsPath: filepath.Join(sub, "group-periods.json"), Clock: clock, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	if err := os.WriteFile(sub, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	declare(t, gs, store.Group{BizTag: "ord", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:6}", Step: 10})
	if ids, err := gs.Next(context.Background(), "ord", 1, nil); err == nil || len(ids) != 0 {
		t.Fatalf("Next with an unwritable period file = %v, %v, want an error and no ID", ids, err)
	}
}
