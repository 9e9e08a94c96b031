package snowflake_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

// start is the fake clock's starting instant in all generator tests.
var start = time.UnixMilli(1_700_000_000_000)

func newGenerator(t testing.TB, s snowflake.Settings) *snowflake.Generator {
	t.Helper()
	g, err := snowflake.New(context.Background(), s)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return g
}

func mustNext(t testing.TB, g *snowflake.Generator) int64 {
	t.Helper()
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatalf("Next() = %v, want nil", err)
	}
	return id
}

// unique fails the test if ids holds a value twice.
func unique(t testing.TB, ids []int64) {
	t.Helper()
	s := slices.Clone(ids)
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			p := snowflake.Decompose(s[i])
			t.Fatalf("ID %d issued twice (ms %d, worker %d, seq %d)", s[i], p.Millis, p.Worker, p.Sequence)
		}
	}
}

func TestNextClockBack(t *testing.T) {
	tests := []struct {
		name       string
		give       time.Duration // step back after the first ID
		freeze     bool          // the clock does not move while Next sleeps
		wantSleeps []time.Duration
		wantErr    error
		wantCode   int64
	}{
		{name: "1 ms waits 2 ms", give: time.Millisecond, wantSleeps: []time.Duration{2 * time.Millisecond}},
		{name: "3 ms waits 6 ms", give: 3 * time.Millisecond, wantSleeps: []time.Duration{6 * time.Millisecond}},
		{name: "5 ms waits 10 ms", give: 5 * time.Millisecond, wantSleeps: []time.Duration{10 * time.Millisecond}},
		{name: "3 ms and the clock stays behind", give: 3 * time.Millisecond, freeze: true,
			wantSleeps: []time.Duration{6 * time.Millisecond}, wantErr: snowflake.ErrClockBehind, wantCode: -1},
		{name: "6 ms fails at once", give: 6 * time.Millisecond, wantErr: snowflake.ErrClockBackwards, wantCode: -3},
		{name: "2 s fails at once", give: 2 * time.Second, wantErr: snowflake.ErrClockBackwards, wantCode: -3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktest.New(start)
			g := newGenerator(t, snowflake.Settings{WorkerID: 5, Clock: clock, ZeroStart: true})
			first := mustNext(t, g)
			clock.Add(-tt.give)
			clock.Freeze(tt.freeze)
			got, err := g.Next(context.Background())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Next() = %d, %v, want error %v", got, err, tt.wantErr)
			}
			if code := snowflake.Code(err); code != tt.wantCode {
				t.Errorf("Code(%v) = %d, want %d", err, code, tt.wantCode)
			}
			if sleeps := clock.Sleeps(); !slices.Equal(sleeps, tt.wantSleeps) {
				t.Errorf("Sleep calls = %v, want %v", sleeps, tt.wantSleeps)
			}
			if err != nil {
				var cbe *snowflake.ClockBackwardsError
				if !errors.As(err, &cbe) || cbe.Behind != tt.give {
					t.Errorf("Next() error = %#v, want *ClockBackwardsError{Behind: %v}", err, tt.give)
				}
				return
			}
			if got <= first {
				t.Errorf("Next() = %d after %d, want a larger ID", got, first)
			}
			// The clock was at start-give and slept 2×give.
			if p, want := snowflake.Decompose(got), start.Add(tt.give).UnixMilli(); p.Millis != want {
				t.Errorf("Next() decodes to ms %d, want %d", p.Millis, want)
			}
			if st := g.Stats(); st.ClockBackwardEvents != 1 || st.ClockBackwardWait != tt.wantSleeps[0] {
				t.Errorf("Stats() = %+v, want 1 clock-back event and %v waited", st, tt.wantSleeps[0])
			}
		})
	}
}

// TestNextClockBackGuard: without the clock-back guard, a step back into a millisecond that was
// already used (sequence restarting at 0) repeats IDs.
func TestNextClockBackGuard(t *testing.T) {
	clock := clocktest.New(start)
	g := newGenerator(t, snowflake.Settings{Clock: clock, ZeroStart: true})
	var ids []int64
	for range 3 {
		ids = append(ids, mustNext(t, g))
	}
	clock.Add(time.Millisecond)
	ids = append(ids, mustNext(t, g))
	clock.Add(-time.Millisecond) // back into the first millisecond
	for range 3 {
		ids = append(ids, mustNext(t, g))
	}
	unique(t, ids)
	if !slices.IsSorted(ids) {
		t.Errorf("IDs %v are not increasing", ids)
	}
}

// TestNextSequenceExhausted: 4096 IDs fill a millisecond; the next one waits for the next
// millisecond instead of wrapping the sequence (which would repeat the millisecond's first ID).
func TestNextSequenceExhausted(t *testing.T) {
	clock := clocktest.New(start)
	g := newGenerator(t, snowflake.Settings{WorkerID: 1023, Clock: clock, ZeroStart: true})
	ids := make([]int64, 0, 4097)
	for range 4096 {
		ids = append(ids, mustNext(t, g))
	}
	if len(clock.Sleeps()) != 0 {
		t.Fatalf("Sleep calls = %v while the millisecond had room", clock.Sleeps())
	}
	last := mustNext(t, g)
	ids = append(ids, last)
	unique(t, ids)
	if got, want := clock.Sleeps(), []time.Duration{time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("Sleep calls = %v, want %v", got, want)
	}
	p := snowflake.Decompose(last)
	if p.Millis != start.UnixMilli()+1 || p.Sequence != 0 || p.Worker != 1023 {
		t.Errorf("Decompose(Next()) = %+v, want ms %d, worker 1023, seq 0", p, start.UnixMilli()+1)
	}
	if st := g.Stats(); st.SequenceWaits != 1 || st.SequenceWait != time.Millisecond || st.Issued != 4097 {
		t.Errorf("Stats() = %+v, want 1 sequence wait of 1ms, 4097 issued", st)
	}
}

// TestNextSequenceWaitPartialMillisecond: the wait lasts until the next millisecond boundary.
func TestNextSequenceWaitPartialMillisecond(t *testing.T) {
	clock := clocktest.New(start.Add(300 * time.Microsecond))
	l := snowflake.DefaultLayout()
	l.TimeBits, l.SequenceBits = 51, 2 // 4 IDs per ms
	g := newGenerator(t, snowflake.Settings{Layout: l, Clock: clock, ZeroStart: true})
	for range 5 {
		mustNext(t, g)
	}
	if got, want := clock.Sleeps(), []time.Duration{700 * time.Microsecond}; !slices.Equal(got, want) {
		t.Errorf("Sleep calls = %v, want %v", got, want)
	}
}

// TestNextSequenceWaitStuckClock: a clock that does not move makes Next fail after a bounded
// wait instead of looping for ever.
func TestNextSequenceWaitStuckClock(t *testing.T) {
	clock := clocktest.New(start)
	l := snowflake.DefaultLayout()
	l.TimeBits, l.SequenceBits = 52, 1 // 2 IDs per ms
	g := newGenerator(t, snowflake.Settings{Layout: l, Clock: clock, ZeroStart: true})
	mustNext(t, g)
	mustNext(t, g)
	clock.Freeze(true)
	_, err := g.Next(context.Background())
	if !errors.Is(err, snowflake.ErrClockBehind) {
		t.Fatalf("Next() = %v, want %v", err, snowflake.ErrClockBehind)
	}
	if n := len(clock.Sleeps()); n < 2 || n > 30 {
		t.Errorf("Next() slept %d times, want a small bounded number", n)
	}
}

// steppingClock steps the fake clock back by step during the first Sleep.
type steppingClock struct {
	*clocktest.Clock
	step time.Duration
	once sync.Once
}

func (c *steppingClock) Sleep(d time.Duration) {
	c.Clock.Sleep(d)
	c.once.Do(func() { c.Clock.Add(-c.step) })
}

// TestNextClockBackDuringSequenceWait: the clock steps back while Next waits for the next
// millisecond; Next applies the clock-back rule instead of waiting for ever.
func TestNextClockBackDuringSequenceWait(t *testing.T) {
	tests := []struct {
		name    string
		give    time.Duration
		wantErr error
	}{
		{name: "2 s back", give: 2 * time.Second, wantErr: snowflake.ErrClockBackwards},
		{name: "3 ms back is waited out", give: 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &steppingClock{Clock: clocktest.New(start), step: tt.give}
			l := snowflake.DefaultLayout()
			l.TimeBits, l.SequenceBits = 52, 1
			g := newGenerator(t, snowflake.Settings{Layout: l, Clock: clock, ZeroStart: true})
			ids := []int64{mustNext(t, g), mustNext(t, g)}
			id, err := g.Next(context.Background())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Next() = %d, %v, want error %v", id, err, tt.wantErr)
			}
			if err == nil {
				unique(t, append(ids, id))
			}
		})
	}
}

func TestNextRandomStart(t *testing.T) {
	clock := clocktest.New(start)
	g := newGenerator(t, snowflake.Settings{Clock: clock})
	firsts := map[int64]bool{}
	for range 200 {
		p := snowflake.Decompose(mustNext(t, g))
		if p.Sequence >= snowflake.RandomStartBound {
			t.Fatalf("first sequence of a millisecond = %d, want < %d", p.Sequence, snowflake.RandomStartBound)
		}
		firsts[p.Sequence] = true
		if q := snowflake.Decompose(mustNext(t, g)); q.Sequence != p.Sequence+1 {
			t.Fatalf("second sequence = %d, want %d", q.Sequence, p.Sequence+1)
		}
		clock.Add(time.Millisecond)
	}
	if len(firsts) < 10 {
		t.Errorf("first sequences took %d distinct values in 200 ms, want a spread", len(firsts))
	}
}

func TestNextRandomStartExhaustion(t *testing.T) {
	clock := clocktest.New(start)
	g := newGenerator(t, snowflake.Settings{Clock: clock})
	first := snowflake.Decompose(mustNext(t, g)).Sequence
	n := int64(1)
	for len(clock.Sleeps()) == 0 {
		mustNext(t, g)
		n++
	}
	if want := 4096 - first + 1; n != want {
		t.Errorf("IDs until the first wait = %d, want %d (first sequence %d)", n, want, first)
	}
}

func TestNextInterrupted(t *testing.T) {
	g := newGenerator(t, snowflake.Settings{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.Next(ctx)
	if !errors.Is(err, snowflake.ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Next() = %v, want ErrInterrupted wrapping context.Canceled", err)
	}
	if code := snowflake.Code(err); code != -2 {
		t.Errorf("Code(%v) = %d, want -2", err, code)
	}
}

// blockingClock blocks Sleep until release is closed.
type blockingClock struct {
	*clocktest.Clock
	sleeping chan struct{}
	release  chan struct{}
}

func (c *blockingClock) Sleep(d time.Duration) {
	close(c.sleeping)
	<-c.release
	c.Clock.Sleep(d)
}

// TestNextWaitDoesNotHoldLock: while one caller waits out a clock step back, others are not
// blocked on the generator's lock.
func TestNextWaitDoesNotHoldLock(t *testing.T) {
	clock := &blockingClock{Clock: clocktest.New(start), sleeping: make(chan struct{}), release: make(chan struct{})}
	g := newGenerator(t, snowflake.Settings{Clock: clock})
	mustNext(t, g)
	clock.Add(-3 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := g.Next(context.Background())
		done <- err
	}()
	<-clock.sleeping
	statsDone := make(chan struct{})
	go func() {
		g.Stats()
		clock.Add(10 * time.Millisecond) // the clock recovers meanwhile
		_, err := g.Next(context.Background())
		if err != nil {
			t.Errorf("Next() from a second caller = %v, want nil", err)
		}
		close(statsDone)
	}()
	select {
	case <-statsDone:
	case <-time.After(5 * time.Second):
		t.Fatal("Stats() and Next() blocked while another caller waited for the clock")
	}
	close(clock.release)
	if err := <-done; err != nil {
		t.Fatalf("Next() of the waiting caller = %v, want nil", err)
	}
}

type fakeLease struct{ expiry time.Time }

func (l fakeLease) Expiry() time.Time { return l.expiry }

func TestNextLease(t *testing.T) {
	clock := clocktest.New(start)
	g := newGenerator(t, snowflake.Settings{Clock: clock, Lease: fakeLease{start.Add(time.Second)}})
	mustNext(t, g)
	clock.Add(time.Second)
	if _, err := g.Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Fatalf("Next() = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
}

func TestNextLayoutEnd(t *testing.T) {
	l := snowflake.DefaultLayout()
	l.TimeBits, l.WorkerBits = 32, 19
	l.Epoch = start.Add(-(1<<32 - 2) * time.Millisecond) // two ms left
	clock := clocktest.New(start)
	g := newGenerator(t, snowflake.Settings{Layout: l, Clock: clock})
	mustNext(t, g)
	clock.Add(time.Millisecond)
	mustNext(t, g)
	clock.Add(time.Millisecond)
	if _, err := g.Next(context.Background()); !errors.Is(err, snowflake.ErrTimeRange) {
		t.Fatalf("Next() = %v, want %v", err, snowflake.ErrTimeRange)
	}
}

func TestNew(t *testing.T) {
	future := snowflake.DefaultLayout()
	future.Epoch = time.Now().Add(time.Hour)
	tests := []struct {
		name    string
		give    snowflake.Settings
		wantErr error
	}{
		{name: "zero settings"},
		{name: "worker 1023", give: snowflake.Settings{WorkerID: 1023}},
		{name: "worker 1024", give: snowflake.Settings{WorkerID: 1024}, wantErr: snowflake.ErrWorkerRange},
		{name: "worker -1", give: snowflake.Settings{WorkerID: -1}, wantErr: snowflake.ErrWorkerRange},
		{name: "epoch in the future", give: snowflake.Settings{Layout: future}, wantErr: snowflake.ErrInvalidLayout},
		{name: "high-water load fails", give: snowflake.Settings{HighWater: &failingHighWater{loadErr: errors.New("disk on fire")}}, wantErr: snowflake.ErrHighWater},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := snowflake.New(context.Background(), tt.give)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New() = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := snowflake.New(context.Background(), snowflake.Settings{HighWaterWindow: time.Microsecond}); err == nil {
		t.Errorf("New(HighWaterWindow: 1µs) = nil, want an error")
	}
}

func TestCode(t *testing.T) {
	tests := []struct {
		give error
		want int64
	}{
		{give: nil, want: 0},
		{give: &snowflake.ClockBackwardsError{Behind: time.Millisecond, Err: snowflake.ErrClockBehind}, want: -1},
		{give: fmt.Errorf("x: %w", snowflake.ErrInterrupted), want: -2},
		{give: context.DeadlineExceeded, want: -2},
		{give: &snowflake.ClockBackwardsError{Behind: time.Second, Err: snowflake.ErrClockBackwards}, want: -3},
		{give: &snowflake.ClockBackwardsError{Behind: time.Second, Err: snowflake.ErrClockBehindMark}, want: -3},
		{give: snowflake.ErrHighWater, want: -4},
		// A store that hit its own deadline: the mark was not stored, the caller was not
		// interrupted (issue 23: -2 under a black-holed lease database).
		{give: fmt.Errorf("%w: not stored (1): %w", snowflake.ErrHighWater, fmt.Errorf("renew: %w", context.DeadlineExceeded)), want: -4},
		{give: fmt.Errorf("%w: %w", snowflake.ErrInterrupted, context.Canceled), want: -2},
		{give: errors.New("other"), want: -1},
	}
	for _, tt := range tests {
		if got := snowflake.Code(tt.give); got != tt.want {
			t.Errorf("Code(%v) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

// TestNextConcurrent: three generators with their own worker IDs, each called from several
// goroutines on the real clock, issue no ID twice and every ID decodes to its worker.
func TestNextConcurrent(t *testing.T) {
	perGenerator := 1_000_000
	if testing.Short() {
		perGenerator = 100_000
	}
	const goroutines = 4
	workers := []int64{0, 511, 1023}
	results := make([][]int64, len(workers)*goroutines)
	var wg sync.WaitGroup
	for wi, w := range workers {
		g := newGenerator(t, snowflake.Settings{WorkerID: w})
		for gi := range goroutines {
			wg.Go(func() {
				ids := make([]int64, 0, perGenerator/goroutines)
				prev := int64(-1)
				for range perGenerator / goroutines {
					id, err := g.Next(context.Background())
					if err != nil {
						t.Errorf("Next() = %v", err)
						return
					}
					if id <= prev {
						t.Errorf("Next() = %d after %d in one goroutine, want increasing", id, prev)
						return
					}
					prev = id
					ids = append(ids, id)
				}
				results[wi*goroutines+gi] = ids
			})
		}
	}
	wg.Wait()
	all := make([]int64, 0, len(workers)*perGenerator)
	for i, ids := range results {
		want := workers[i/goroutines]
		for _, id := range ids {
			if w := snowflake.Decompose(id).Worker; w != want {
				t.Fatalf("Decompose(%d).Worker = %d, want %d", id, w, want)
			}
		}
		all = append(all, ids...)
	}
	if len(all) != len(workers)*perGenerator {
		t.Fatalf("got %d IDs, want %d", len(all), len(workers)*perGenerator)
	}
	unique(t, all)
}

// TestNextConcurrentClockSteps: many callers while the fake clock jumps forwards and backwards;
// every successful ID is unique and every failure is one of the documented clock errors.
func TestNextConcurrentClockSteps(t *testing.T) {
	clock := clocktest.New(start)
	l := snowflake.DefaultLayout()
	l.TimeBits, l.SequenceBits = 47, 6 // 64 IDs per ms, so the sequence runs out often
	g := newGenerator(t, snowflake.Settings{Layout: l, Clock: clock, HighWater: &recordingHighWater{}, HighWaterWindow: 50 * time.Millisecond})
	steps := []time.Duration{time.Millisecond, -2 * time.Millisecond, 3 * time.Millisecond, -20 * time.Millisecond, 25 * time.Millisecond, 0}
	stop := make(chan struct{})
	var stepper sync.WaitGroup
	stepper.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			clock.Add(steps[i%len(steps)])
			time.Sleep(50 * time.Microsecond)
		}
	})
	const callers, perCaller = 8, 5000
	results := make([][]int64, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for range perCaller {
				id, err := g.Next(context.Background())
				switch {
				case err == nil:
					results[c] = append(results[c], id)
				case errors.Is(err, snowflake.ErrClockBackwards), errors.Is(err, snowflake.ErrClockBehind):
				default:
					t.Errorf("Next() = %v, want nil or a clock error", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	stepper.Wait()
	var all []int64
	for _, ids := range results {
		if !slices.IsSorted(ids) {
			t.Errorf("one caller's IDs are not increasing")
		}
		all = append(all, ids...)
	}
	if len(all) < callers*perCaller/10 {
		t.Fatalf("only %d of %d calls succeeded", len(all), callers*perCaller)
	}
	unique(t, all)
	t.Logf("%d IDs, stats %+v", len(all), g.Stats())
}
