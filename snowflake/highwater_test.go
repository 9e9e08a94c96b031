package snowflake_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

// failingHighWater fails Load or Store with the given errors.
type failingHighWater struct {
	loadErr, storeErr error
}

func (f *failingHighWater) Load(context.Context) (time.Time, error) { return time.Time{}, f.loadErr }
func (f *failingHighWater) Store(context.Context, time.Time) error  { return f.storeErr }

// recordingHighWater keeps marks in memory and records every Store.
type recordingHighWater struct {
	mu     sync.Mutex
	marks  []time.Time
	failAt int // Store number (1-based) that fails; 0 never
}

func (r *recordingHighWater) Load(context.Context) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.marks) == 0 {
		return time.Time{}, nil
	}
	return r.marks[len(r.marks)-1], nil
}

func (r *recordingHighWater) Store(_ context.Context, mark time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failAt == len(r.marks)+1 {
		return errors.New("store unavailable")
	}
	r.marks = append(r.marks, mark)
	return nil
}

func (r *recordingHighWater) last() time.Time {
	m, _ := r.Load(context.Background())
	return m
}

func TestFileHighWater(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "highwater")
	hw := snowflake.NewFileHighWater(path)
	got, err := hw.Load(ctx)
	if err != nil || !got.IsZero() {
		t.Fatalf("Load() of a missing file = %v, %v, want zero time, nil", got, err)
	}
	mark := time.UnixMilli(1_700_000_003_000)
	if err := hw.Store(ctx, mark); err != nil {
		t.Fatalf("Store() = %v", err)
	}
	if err := hw.Store(ctx, mark.Add(-time.Second)); err != nil { // never lowers
		t.Fatalf("Store(lower) = %v", err)
	}
	b, _ := os.ReadFile(path)
	if got, want := string(b), "1700000003000\n"; got != want {
		t.Errorf("file content = %q, want %q", got, want)
	}
	got, err = snowflake.NewFileHighWater(path).Load(ctx)
	if err != nil || !got.Equal(mark) {
		t.Errorf("Load() = %v, %v, want %v", got, err, mark)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the mark file (no temporary files left)", len(entries))
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := snowflake.NewFileHighWater(path).Load(ctx); err == nil {
		t.Errorf("Load() of a malformed file = nil, want an error")
	}
}

// TestFileHighWaterRemovesLeftovers: Load removes the temporary files that a process killed
// inside a Store left beside the mark file and nothing else; the mark reads as before.
func TestFileHighWaterRemovesLeftovers(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no flock here: leftovers are kept")
	}
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "snowflake-3.highwater")
	mark := time.UnixMilli(1_700_000_003_000)
	if err := snowflake.NewFileHighWater(path).Store(ctx, mark); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".snowflake-3.highwater.tmp-77", ".snowflake-3.highwater.tmp-4120938", ".segment-marks.json.tmp-8", "snowflake-4.highwater"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("17000"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := snowflake.NewFileHighWater(path).Load(ctx)
	if err != nil || !got.Equal(mark) {
		t.Fatalf("Load() = %v, %v, want %v", got, err, mark)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".segment-marks.json.tmp-8", "snowflake-3.highwater", "snowflake-4.highwater"}; !slices.Equal(names, want) {
		t.Errorf("after Load the directory holds %q, want %q", names, want)
	}
}

// TestRestartBehindMark: a new generator on the same FileHighWater whose clock is behind the
// stored mark (a restart after the clock was set back) issues nothing until its clock reaches
// the mark, and then nothing that the earlier run issued.
func TestRestartBehindMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "highwater")
	clock := clocktest.New(start)
	g1 := newGenerator(t, snowflake.Settings{WorkerID: 7, Clock: clock, HighWater: snowflake.NewFileHighWater(path), ZeroStart: true})
	var ids []int64
	for range 2000 { // 2 s of IDs, two per millisecond
		ids = append(ids, mustNext(t, g1), mustNext(t, g1))
		clock.Add(time.Millisecond)
	}
	st := g1.Stats()
	if want := start.Add(snowflake.DefaultHighWaterWindow); !st.HighWater.Equal(want) || st.HighWaterStores != 1 {
		t.Fatalf("Stats() = %+v, want mark %v stored once", st, want)
	}

	// Restart with the clock back at the first run's start.
	clock.Set(start)
	g2 := newGenerator(t, snowflake.Settings{WorkerID: 7, Clock: clock, HighWater: snowflake.NewFileHighWater(path), ZeroStart: true})
	if got := g2.Stats().Floor; !got.Equal(st.HighWater) {
		t.Fatalf("Stats().Floor = %v, want %v", got, st.HighWater)
	}
	for _, at := range []time.Duration{0, time.Second, 2999 * time.Millisecond} {
		clock.Set(start.Add(at))
		id, err := g2.Next(context.Background())
		var cbe *snowflake.ClockBackwardsError
		if !errors.Is(err, snowflake.ErrClockBehindMark) || !errors.As(err, &cbe) {
			t.Fatalf("Next() at +%v = %d, %v, want %v", at, id, err, snowflake.ErrClockBehindMark)
		}
		if want := 3*time.Second - at; cbe.Behind != want {
			t.Errorf("Behind = %v, want %v", cbe.Behind, want)
		}
		if code := snowflake.Code(err); code != -3 {
			t.Errorf("Code(%v) = %d, want -3", err, code)
		}
	}
	clock.Set(start.Add(3 * time.Second))
	id := mustNext(t, g2)
	if got, want := snowflake.Decompose(id).Millis, start.Add(3*time.Second).UnixMilli(); got != want {
		t.Errorf("first ID after restart at ms %d, want %d", got, want)
	}
	if id <= slices.Max(ids) {
		t.Errorf("first ID after restart %d <= an ID of the earlier run %d", id, slices.Max(ids))
	}
	unique(t, append(ids, id))
}

// TestHighWaterMarkGuard: every ID lies below a mark that was stored before the ID was issued;
// a failing store stops the generator at the old mark. (Background stores are off here;
// TestHighWaterAhead covers them.)
func TestHighWaterMarkGuard(t *testing.T) {
	clock := clocktest.New(start)
	hw := &recordingHighWater{failAt: 4}
	// No background stores: each store happens when a request needs it, in a known order.
	g := newGenerator(t, snowflake.Settings{Clock: clock, HighWater: hw, HighWaterWindow: 100 * time.Millisecond, HighWaterAhead: -1})
	for i := range 350 {
		id, err := g.Next(context.Background())
		if err != nil {
			// The fourth store fails: the first three covered [start, start+300ms).
			if !errors.Is(err, snowflake.ErrHighWater) || i != 300 {
				t.Fatalf("Next() #%d = %v, want ErrHighWater at #300", i, err)
			}
			if code := snowflake.Code(err); code != -4 {
				t.Errorf("Code(%v) = %d, want -4 (issue 16 item 9: not Leaf's -1)", err, code)
			}
			break
		}
		if ms := snowflake.Decompose(id).Millis; ms >= hw.last().UnixMilli() {
			t.Fatalf("Next() at ms %d, at or past the stored mark %v", ms, hw.last())
		}
		clock.Add(time.Millisecond)
	}
	if st := g.Stats(); st.HighWaterStores != 3 || st.HighWaterFailures != 1 {
		t.Errorf("Stats() = %+v, want 3 stores and 1 failure", st)
	}
	hw.failAt = 0 // the store recovers
	mustNext(t, g)
}

// TestHighWaterStoreDeadlineCode: a mark store that failed on its own deadline (the lease
// database gave no answer in time; the driver's error wraps context.DeadlineExceeded) is
// ErrHighWater, code -4, for the request that waited for it: that request was not
// interrupted, so not Leaf's -2 (issue 23: 4 of 249,537 answers under a black-holed lease
// database were -2).
func TestHighWaterStoreDeadlineCode(t *testing.T) {
	hw := &failingHighWater{storeErr: fmt.Errorf("sqllease: renew worker ID 3: %w", context.DeadlineExceeded)}
	g := newGenerator(t, snowflake.Settings{Clock: clocktest.New(start), HighWater: hw, HighWaterAhead: -1})
	_, err := g.Next(context.Background())
	if !errors.Is(err, snowflake.ErrHighWater) {
		t.Fatalf("Next() = %v, want %v", err, snowflake.ErrHighWater)
	}
	if code := snowflake.Code(err); code != -4 {
		t.Errorf("Code(%v) = %d, want -4 (the mark was not stored; the request was not interrupted)", err, code)
	}
}

// gatedHighWater is a HighWater whose Store blocks until the gate is opened, ignoring its
// context (a database that stopped answering without closing the connection).
type gatedHighWater struct {
	recordingHighWater
	gate chan struct{}
}

func (g *gatedHighWater) Store(ctx context.Context, mark time.Time) error {
	<-g.gate
	return g.recordingHighWater.Store(ctx, mark)
}

// TestHighWaterAhead: within HighWaterAhead of the stored mark, Next issues at once and
// stores the next mark in the background; a request waits only when the clock reaches the
// mark before that store has returned, and then at most HighWaterTimeout.
func TestHighWaterAhead(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(start)
	hw := &gatedHighWater{gate: make(chan struct{})}
	open := sync.OnceFunc(func() { close(hw.gate) })
	t.Cleanup(open)
	g := newGenerator(t, snowflake.Settings{Clock: clock, HighWater: hw, HighWaterWindow: 90 * time.Millisecond,
		HighWaterTimeout: 300 * time.Millisecond, ZeroStart: true})
	go func() { hw.gate <- struct{}{} }() // lets the first store (made by the first request) through
	mustNext(t, g)
	// The mark is start+90ms; the background store starts 30 ms before it.
	clock.Set(start.Add(59 * time.Millisecond))
	mustNext(t, g)
	if st := g.Stats(); st.HighWaterStores != 1 {
		t.Fatalf("Stats() = %+v before the ahead zone, want 1 store", st)
	}
	clock.Set(start.Add(60 * time.Millisecond))
	mustNext(t, g) // starts the background store, which blocks at the gate
	clock.Set(start.Add(89 * time.Millisecond))
	mustNext(t, g) // still below the mark: issued while the store hangs
	clock.Set(start.Add(90 * time.Millisecond))
	if id, err := g.Next(ctx); !errors.Is(err, snowflake.ErrHighWater) || snowflake.Code(err) != -4 {
		t.Fatalf("Next() at the mark with the store hanging = %d, %v, want %v (code -4: the mark is not stored)", id, err, snowflake.ErrHighWater)
	}
	open()
	id := mustNext(t, g)
	if st := g.Stats(); st.HighWaterStores != 2 || !st.HighWater.Equal(start.Add(150*time.Millisecond)) {
		t.Errorf("Stats() after the store returned = %+v, want 2 stores, mark start+150ms (stored from +60ms)", st)
	}
	if ms := snowflake.Decompose(id).Millis; ms != start.Add(90*time.Millisecond).UnixMilli() {
		t.Errorf("ID at ms %d, want the mark's ms", ms)
	}
}

// TestHighWaterStoreHangs: a store that never answers (and ignores its context) holds no
// request longer than HighWaterTimeout: every concurrent caller gets ErrHighWater on its own
// deadline instead of queueing behind the others.
func TestHighWaterStoreHangs(t *testing.T) {
	const timeout = 300 * time.Millisecond
	hw := &gatedHighWater{gate: make(chan struct{})}
	t.Cleanup(func() { close(hw.gate) })
	g := newGenerator(t, snowflake.Settings{HighWater: hw, HighWaterTimeout: timeout})
	const callers = 8
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			began := time.Now()
			_, err := g.Next(context.Background())
			if !errors.Is(err, snowflake.ErrHighWater) {
				t.Errorf("Next() with the store hanging = %v, want %v", err, snowflake.ErrHighWater)
			}
			// Queued behind one another, the callers would wait up to 8 timeouts.
			if took := time.Since(began); took > 4*timeout {
				t.Errorf("Next() answered after %v, want about the %v timeout", took, timeout)
			}
		})
	}
	wg.Wait()
}

// TestKeepAhead: with no request at all, KeepAhead stores the first mark and then the next
// one once the clock is within HighWaterAhead of it; a request then finds the mark ahead and
// stores nothing itself.
func TestKeepAhead(t *testing.T) {
	clock := clocktest.New(start)
	hw := &recordingHighWater{}
	g := newGenerator(t, snowflake.Settings{Clock: clock, HighWater: hw, HighWaterWindow: 90 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.KeepAhead(ctx) }()
	defer func() { cancel(); <-done }()
	waitStores := func(n int64) snowflake.Stats {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if st := g.Stats(); st.HighWaterStores >= n {
				return st
			}
		}
		t.Fatalf("KeepAhead made %d stores within 10 s, want %d", g.Stats().HighWaterStores, n)
		return snowflake.Stats{}
	}
	if st := waitStores(1); !st.HighWater.Equal(start.Add(90 * time.Millisecond)) {
		t.Errorf("first mark %v, want start + 90ms", st.HighWater)
	}
	clock.Set(start.Add(60 * time.Millisecond)) // within the 30 ms ahead zone
	if st := waitStores(2); !st.HighWater.Equal(start.Add(150 * time.Millisecond)) {
		t.Errorf("second mark %v, want start + 60ms + 90ms", st.HighWater)
	}
	mustNext(t, g)
	if st := g.Stats(); st.HighWaterStores != 2 || !hw.last().Equal(start.Add(150*time.Millisecond)) {
		t.Errorf("Stats() after a request = %+v, want the 2 stores KeepAhead made and none by the request", st)
	}
	cancel()
	<-done
}
