package segment_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
)

// fastRetry makes a refusing tag retry within milliseconds.
var fastRetry = segment.Config{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, RefuseRetryMax: 5 * time.Millisecond}

// markOf loads the file at path afresh, as a restarted server would.
func markOf(t testing.TB, path, tag string) int64 {
	t.Helper()
	m, err := segment.NewFileMarks(path).Load(context.Background())
	if err != nil {
		t.Fatalf("FileMarks(%s).Load: %v", path, err)
	}
	return m[tag]
}

// syncBuffer is a log sink safe for the generator's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMarksSurviveRestart: a new Generator on the same marks file remembers
// the mark, so a table set back while it was down is refused instead of
// serving the old IDs again.
func TestMarksSurviveRestart(t *testing.T) {
	t.Parallel()
	for _, k := range []dbKind{sqliteDB, postgresDB} {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "rs", 1, 100)
			path := filepath.Join(t.TempDir(), "segment-marks.json")
			cfg := fastRetry
			cfg.Marks = segment.NewFileMarks(path)
			g1, err := segment.New(context.Background(), db.Store, cfg)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int64]bool{}
			for range 150 {
				seen[mustGet(t, g1, "rs")] = true
			}
			waitNextReady(t, g1, "rs")
			g1.Close()
			high := db.MaxID(t, "rs")
			if got := markOf(t, path, "rs"); got != high {
				t.Fatalf("mark in %s = %d, want max_id %d", path, got, high)
			}

			db.Exec(t, "UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'rs'") // the restore
			cfg.Marks = segment.NewFileMarks(path)
			g2 := newGen(t, db.Store, cfg)
			if st, _ := statsOf(g2, "rs"); st.HighWater != high {
				t.Fatalf("HighWater after restart = %d, want %d", st.HighWater, high)
			}
			id, err := g2.Get(context.Background(), "rs")
			if !errors.Is(err, segment.ErrRewound) || segment.Code(err) != -3 {
				t.Fatalf("Get(%q) after restore = %d, %v, want ErrRewound as -3", "rs", id, err)
			}
			if st, _ := statsOf(g2, "rs"); !st.Refusing || st.HighWater != high {
				t.Fatalf("Stats after refusal: Refusing=%v HighWater=%d, want true, %d", st.Refusing, st.HighWater, high)
			}
		})
	}
}

// TestRefusesUntilFenced: a table set back under a running generator is
// refused, waiting for the fence allocates nothing, and after Fence(tag,
// mark) the tag serves by itself; no ID is ever repeated or below the mark.
func TestRefusesUntilFenced(t *testing.T) {
	t.Parallel()
	for _, k := range []dbKind{sqliteDB, postgresDB} {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "fence", 1, 100)
			path := filepath.Join(t.TempDir(), "segment-marks.json")
			logs := &syncBuffer{}
			cfg := fastRetry
			cfg.Marks = segment.NewFileMarks(path)
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			cfg.GrowWindow, cfg.ShrinkWindow = time.Nanosecond, time.Hour // step stays 100
			g := newGen(t, db.Store, cfg)
			seen := map[int64]bool{}
			take := func(id int64) {
				t.Helper()
				if seen[id] {
					t.Fatalf("Get(%q) = %d twice", "fence", id)
				}
				seen[id] = true
			}
			for range 250 {
				take(mustGet(t, g, "fence"))
			}
			waitNextReady(t, g, "fence")
			high := db.MaxID(t, "fence") // 401: [301, 401) is next
			db.Exec(t, "UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'fence'")

			var err error
			for err == nil {
				var id int64
				if id, err = g.Get(context.Background(), "fence"); err == nil {
					take(id)
				}
			}
			if !errors.Is(err, segment.ErrRewound) || segment.Code(err) != -3 {
				t.Fatalf("Get(%q) after restore = %v, want ErrRewound as -3", "fence", err)
			}
			st, _ := statsOf(g, "fence")
			if !st.Refusing || st.HighWater != high {
				t.Fatalf("Stats: Refusing=%v HighWater=%d, want true, %d", st.Refusing, st.HighWater, high)
			}
			// The log line is written just after the waiters are woken.
			for _, want := range []string{"level=ERROR", "biz_tag=fence", "high_water=" + strconv.FormatInt(high, 10), "max_id is below the high-water mark", "leafctl tag fence fence"} {
				waittest.For(t, 10*time.Second, "log line with "+want, func() bool { return strings.Contains(logs.String(), want) })
			}

			// The allocation is guarded by the mark in its UPDATE: the
			// rewind is noticed without burning a segment, and while
			// refusing, retries allocate nothing.
			burned := db.MaxID(t, "fence")
			if burned != 1 {
				t.Fatalf("max_id after the refusal = %d, want 1 (nothing allocated)", burned)
			}
			// Wait for three more refused loads (each an allocation refused
			// by the store), not for a fixed time.
			st, _ = statsOf(g, "fence")
			refused := st.LoadFailures
			waittest.For(t, 10*time.Second, "three more refused loads", func() bool {
				if id, err := g.Get(context.Background(), "fence"); err == nil {
					t.Fatalf("Get(%q) = %d while refusing, want an error", "fence", id)
				}
				st, _ := statsOf(g, "fence")
				return st.LoadFailures >= refused+3
			})
			if got := db.MaxID(t, "fence"); got != burned {
				t.Fatalf("max_id while refusing went %d -> %d, want no allocation", burned, got)
			}

			if _, err := db.Store.Fence(context.Background(), "fence", high); err != nil {
				t.Fatal(err)
			}
			var id int64
			waittest.For(t, 10*time.Second, "serving after the fence", func() bool {
				id, err = g.Get(context.Background(), "fence")
				return err == nil
			})
			if id != high {
				t.Fatalf("first ID after Fence(%d) = %d, want %d", high, id, high)
			}
			take(id)
			for range 300 {
				id := mustGet(t, g, "fence")
				if id < high {
					t.Fatalf("Get(%q) = %d, below the mark %d", "fence", id, high)
				}
				take(id)
			}
			if st, _ := statsOf(g, "fence"); st.Refusing {
				t.Fatal("Stats().Refusing still true after serving again")
			}
		})
	}
}

// blockingMarks holds every Store and StoreAll until release is closed, so
// that a test can look at what Get does while a mark is not yet durable.
type blockingMarks struct {
	segment.Marks
	entered chan int64    // receives each mark as Store starts, if not full
	release chan struct{} // one receive per Store; closed to let all proceed
	once    sync.Once
}

func (m *blockingMarks) Store(ctx context.Context, tag string, maxID int64) error {
	select {
	case m.entered <- maxID:
	default:
	}
	<-m.release
	return m.Marks.Store(ctx, tag, maxID)
}

func (m *blockingMarks) StoreAll(ctx context.Context, marks map[string]int64) error {
	<-m.release
	return m.Marks.StoreAll(ctx, marks)
}

func recvMark(t testing.TB, ch <-chan int64) int64 {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no Store of a mark within 5s")
		return 0
	}
}

// TestNoIDBeforeMarkDurable: no ID of a segment is handed out before its
// mark is stored, for the first segment and for a prefetched one; and after
// every Get the file's mark is above the ID.
func TestNoIDBeforeMarkDurable(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "dur", 1, 10)
	path := filepath.Join(t.TempDir(), "segment-marks.json")
	bm := &blockingMarks{Marks: segment.NewFileMarks(path), entered: make(chan int64, 1), release: make(chan struct{})}
	cfg := segment.Config{Marks: bm, WaitTimeout: 300 * time.Millisecond, LoadTimeout: 300 * time.Millisecond}
	g := newGen(t, db.Store, cfg)
	releaseAll := func() { bm.once.Do(func() { close(bm.release) }) }
	t.Cleanup(releaseAll) // before g.Close, which waits for the loads

	// First segment: Get waits for the Store and gives up at its timeout.
	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := g.Get(context.Background(), "dur")
		done <- result{id, err}
	}()
	if got := recvMark(t, bm.entered); got != 11 {
		t.Fatalf("first Store mark = %d, want 11", got)
	}
	if r := <-done; r.err == nil {
		t.Fatalf("Get(%q) = %d while its mark was not stored, want an error", "dur", r.id)
	}

	// Let that Store finish; the next Get serves [1, 11) with the mark on disk.
	select {
	case bm.release <- struct{}{}:
	case <-time.After(5 * time.Second):
		t.Fatal("no Store waiting for release")
	}
	waittest.For(t, 10*time.Second, "first segment", func() bool { st, _ := statsOf(g, "dur"); return st.InitOK })
	if id := mustGet(t, g, "dur"); id != 1 || markOf(t, path, "dur") != 11 {
		t.Fatalf("Get(%q) = %d with file mark %d, want 1 with 11", "dur", id, markOf(t, path, "dur"))
	}

	// Prefetch of [11, 21): its Store blocks; the rest of [1, 11) serves,
	// then Get must not reach into the next segment.
	for want := int64(2); want <= 10; want++ {
		if id := mustGet(t, g, "dur"); id != want {
			t.Fatalf("Get(%q) = %d, want %d", "dur", id, want)
		}
	}
	if got := recvMark(t, bm.entered); got != 21 {
		t.Fatalf("prefetch Store mark = %d, want 21", got)
	}
	if id, err := g.Get(context.Background(), "dur"); err == nil {
		t.Fatalf("Get(%q) = %d from a segment whose mark is not stored, want ErrNoSegment", "dur", id)
	}
	releaseAll()
	waitNextReady(t, g, "dur")
	for range 200 {
		id := mustGet(t, g, "dur")
		if mark := markOf(t, path, "dur"); id >= mark {
			t.Fatalf("Get(%q) = %d but the file's mark is %d", "dur", id, mark)
		}
	}
}

// failingMarks cannot store.
type failingMarks struct{}

func (failingMarks) Load(context.Context) (map[string]int64, error) { return map[string]int64{}, nil }
func (failingMarks) Store(context.Context, string, int64) error     { return errors.New("disk full") }
func (failingMarks) StoreAll(context.Context, map[string]int64) error {
	return errors.New("disk full")
}
func (failingMarks) Lower(context.Context, string, int64, int64) error {
	return errors.New("disk full")
}
func (failingMarks) Returns(context.Context) (map[string]int64, error) {
	return map[string]int64{}, nil
}

// TestMarkNotStoredRefused: a segment whose mark cannot be stored is not
// served.
func TestMarkNotStoredRefused(t *testing.T) {
	t.Parallel()
	db := openDB(t, sqliteDB.dsn(t))
	db.Create(t, "full", 1, 10)
	g := newGen(t, db.Store, segment.Config{Marks: failingMarks{}})
	if id, err := g.Get(context.Background(), "full"); err == nil || segment.Code(err) != -3 || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Get(%q) = %d, %v, want -3 naming the Store error", "full", id, err)
	}
}

func TestFileMarks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "marks.json")
	f := segment.NewFileMarks(path)
	if m, err := f.Load(ctx); err != nil || len(m) != 0 {
		t.Fatalf("Load of a missing file = %v, %v, want empty, nil", m, err)
	}
	big := int64(math.MaxInt64 - 1) // past 2^53: must survive digit for digit
	for _, give := range []struct {
		tag  string
		mark int64
	}{{"a", 100}, {"b", big}, {"a", 50}, {"a", 200}} {
		if err := f.Store(ctx, give.tag, give.mark); err != nil {
			t.Fatalf("Store(%q, %d): %v", give.tag, give.mark, err)
		}
	}
	m, err := segment.NewFileMarks(path).Load(ctx)
	if err != nil || m["a"] != 200 || m["b"] != big || len(m) != 2 {
		t.Fatalf("Load = %v, %v, want a=200 (never lowered), b=%d", m, err, big)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"9223372036854775806"`) {
		t.Errorf("file holds %s, want marks as decimal strings", b)
	}

	for _, bad := range []string{"{", `{"marks":{"a":"x"}}`, `{"marks":{"a":12}}`} {
		p := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := segment.NewFileMarks(p).Load(ctx); err == nil {
			t.Errorf("Load(%q) = nil error, want one", bad)
		}
		db := openDB(t, sqliteDB.dsn(t))
		if g, err := segment.New(ctx, db.Store, segment.Config{Marks: segment.NewFileMarks(p)}); err == nil {
			g.Close()
			t.Errorf("New with marks file %q = nil error, want one", bad)
		}
	}
}

// TestRefreshRaisesMarks: two generators (two servers) on one table. A's own
// segment is older than B's, so A's mark alone would accept a table put back
// to A's max_id and repeat B's IDs. The refresh reads the table's max_id
// into A's mark: the rewind is refused instead.
func TestRefreshRaisesMarks(t *testing.T) {
	t.Parallel()
	for _, k := range []dbKind{sqliteDB, postgresDB} {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, k.dsn(t))
			db.Create(t, "obs", 1, 10)
			cfg := fastRetry
			cfg.GrowWindow, cfg.ShrinkWindow = time.Nanosecond, time.Hour // step stays 10
			cfg.RefreshInterval = time.Hour                               // refreshed by hand below
			pathA := filepath.Join(t.TempDir(), "a.json")
			cfgA := cfg
			cfgA.Marks = segment.NewFileMarks(pathA)
			a := newGen(t, db.Store, cfgA)
			b := newGen(t, db.Store, cfg)
			if id := mustGet(t, a, "obs"); id != 1 { // A: [1, 11)
				t.Fatalf("A first ID = %d, want 1", id)
			}
			aMax := db.MaxID(t, "obs")
			var fromB []int64
			for range 5 { // B: the next segments
				fromB = append(fromB, mustGet(t, b, "obs"))
			}
			waittest.For(t, 10*time.Second, "B idle", func() bool { st, _ := statsOf(b, "obs"); return !st.Loading })
			want := db.MaxID(t, "obs") // B may still prefetch later: at least this
			if err := a.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := markOf(t, pathA, "obs"); got < want {
				t.Fatalf("A's stored mark after refresh = %d, want at least the table's max_id %d", got, want)
			}
			// Spend A's segment, then put the table back to where A left it.
			for range 9 {
				mustGet(t, a, "obs")
			}
			waittest.For(t, 10*time.Second, "A idle", func() bool { st, _ := statsOf(a, "obs"); return !st.Loading })
			db.Exec(t, "UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = 'obs'", aMax)
			for range 30 {
				id, err := a.Get(context.Background(), "obs")
				if err == nil && slices.Contains(fromB, id) {
					t.Fatalf("A handed out %d, already handed out by B, after the table went back", id)
				}
				if err == nil && id >= aMax {
					continue // A's prefetched segment from before the rewind (above B's), fine
				}
				if err != nil && !errors.Is(err, segment.ErrRewound) && segment.Code(err) != -3 {
					t.Fatalf("A Get after rewind: %v", err)
				}
			}
			if st, _ := statsOf(a, "obs"); !st.Refusing {
				t.Errorf("A Stats after the rewind: Refusing = false, want true")
			}
		})
	}
}
