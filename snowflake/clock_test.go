package snowflake_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

// fakeClocks are a wall clock and a monotonic clock that move only when the test moves them,
// for snowflake.NewAnchoredClockFrom. Safe for concurrent use.
type fakeClocks struct {
	mu sync.Mutex // guards all fields
	// wall is the wall clock; step moves it alone, as an operator or NTP setting the time does.
	wall time.Time
	// mono is the monotonic clock; it only moves forward, with wall (advance, sleep).
	mono time.Duration
	// reads counts full readings (time.Now in production).
	reads int
	// glitches are added to the wall clock of the next full readings, one each: a thread
	// descheduled between the wall and the monotonic read of one time.Now.
	glitches []time.Duration
}

func newFakeClocks(wall time.Time) *fakeClocks { return &fakeClocks{wall: wall} }

func (f *fakeClocks) read() (time.Time, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	w := f.wall
	if len(f.glitches) > 0 {
		w = w.Add(f.glitches[0])
		f.glitches = f.glitches[1:]
	}
	return w, f.mono
}

func (f *fakeClocks) monoNow() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mono
}

// advance lets d pass on both clocks; sleep is advance as the clock's Sleep.
func (f *fakeClocks) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = f.wall.Add(d)
	f.mono += d
}

func (f *fakeClocks) sleep(d time.Duration) {
	if d > 0 {
		f.advance(d)
	}
}

// step sets the wall clock d forward (negative: back); the monotonic clock does not move.
func (f *fakeClocks) step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = f.wall.Add(d)
}

func (f *fakeClocks) glitch(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.glitches = append(f.glitches, d)
}

func (f *fakeClocks) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *fakeClocks) clock() *snowflake.AnchoredClock {
	return snowflake.NewAnchoredClockFrom(f.read, f.monoNow, f.sleep)
}

// TestAnchoredClock: the clock follows wall-clock steps of AnchorTolerance or more once
// AnchorRecheck of monotonic time has passed, or at once after a Sleep; it ignores smaller
// differences and a single odd reading.
func TestAnchoredClock(t *testing.T) {
	const us = time.Microsecond
	tests := []struct {
		name   string
		step   time.Duration // wall-clock step after the first 500 µs
		glitch time.Duration // added to the next full reading only
		give   time.Duration // then this much passes
		sleep  bool          // in the clock's Sleep
		want   time.Time
	}{
		{name: "no step", give: time.Millisecond, want: start.Add(1500 * us)},
		{name: "10 ms back, seen at the recheck", step: -10 * time.Millisecond, give: time.Millisecond,
			want: start.Add(1500*us - 10*time.Millisecond)},
		{name: "10 ms back, not yet seen before the recheck", step: -10 * time.Millisecond, give: 200 * us,
			want: start.Add(700 * us)},
		{name: "10 ms back, seen after a sleep", step: -10 * time.Millisecond, give: 200 * us, sleep: true,
			want: start.Add(700*us - 10*time.Millisecond)},
		{name: "2 s forward", step: 2 * time.Second, give: time.Millisecond, want: start.Add(1500*us + 2*time.Second)},
		{name: "tolerance back", step: -snowflake.AnchorTolerance, give: time.Millisecond,
			want: start.Add(1500*us - snowflake.AnchorTolerance)},
		{name: "skew below the tolerance ignored", step: -50 * us, give: time.Millisecond, want: start.Add(1500 * us)},
		{name: "one odd reading ignored", glitch: -3 * time.Millisecond, give: time.Millisecond, want: start.Add(1500 * us)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeClocks(start)
			c := f.clock()
			f.advance(500 * us)
			if got, want := c.Now(), start.Add(500*us); !got.Equal(want) {
				t.Fatalf("Now() = %v, want %v", got, want)
			}
			f.step(tt.step)
			if tt.glitch != 0 {
				f.glitch(tt.glitch)
			}
			if tt.sleep {
				c.Sleep(tt.give)
			} else {
				f.advance(tt.give)
			}
			if got := c.Now(); !got.Equal(tt.want) {
				t.Errorf("Now() = %v, want %v (%v off)", got, tt.want, got.Sub(tt.want))
			}
		})
	}
}

// TestAnchoredClockReadsWallOncePerRecheck: between rechecks Now reads only the monotonic
// clock, which is the point of the clock.
func TestAnchoredClockReadsWallOncePerRecheck(t *testing.T) {
	f := newFakeClocks(start)
	c := f.clock()
	const calls = 10_000
	step := snowflake.AnchorRecheck / 1000
	prev := c.Now()
	for range calls {
		f.advance(step)
		now := c.Now()
		if now.Before(prev) {
			t.Fatalf("Now() = %v after %v, want no step back on a steady clock", now, prev)
		}
		prev = now
	}
	// One reading at the anchor, one per recheck.
	if got, want := f.readCount(), 1+calls/1000; got > want {
		t.Errorf("full readings = %d for %d Now calls over %v, want at most %d", got, calls, calls*step, want)
	}
}

// TestAnchoredClockStepBack: with the anchored clock, a wall-clock step back after an ID is
// seen by the generator's clock-back rules (Leaf's): more than 5 ms fails with code -3, up to
// 5 ms is waited out; the IDs stay unique and increasing. Without re-anchoring the clock would
// run on from its anchor, Next would answer an ID and this test would fail.
func TestAnchoredClockStepBack(t *testing.T) {
	tests := []struct {
		name     string
		give     time.Duration
		wantErr  error
		wantCode int64
	}{
		{name: "10 ms back fails at once", give: 10 * time.Millisecond, wantErr: snowflake.ErrClockBackwards, wantCode: -3},
		{name: "3 ms back is waited out", give: 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeClocks(start)
			g := newGenerator(t, snowflake.Settings{WorkerID: 5, Clock: f.clock(), ZeroStart: true})
			first := mustNext(t, g)
			f.step(-tt.give)
			f.advance(snowflake.AnchorRecheck)
			id, err := g.Next(context.Background())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Next() = %d, %v, want error %v", id, err, tt.wantErr)
			}
			if code := snowflake.Code(err); code != tt.wantCode {
				t.Errorf("Code(%v) = %d, want %d", err, code, tt.wantCode)
			}
			if err == nil && id <= first {
				t.Errorf("Next() = %d after %d, want a larger ID", id, first)
			}
			if st := g.Stats(); st.ClockBackwardEvents != 1 {
				t.Errorf("Stats().ClockBackwardEvents = %d, want 1", st.ClockBackwardEvents)
			}
		})
	}
}

// TestAnchoredClockRandomSteps: a generator on the anchored clock while the wall clock is set
// back and forth, with odd readings, never issues an ID twice, its IDs increase, and it fails
// only with the documented clock errors.
func TestAnchoredClockRandomSteps(t *testing.T) {
	f := newFakeClocks(start)
	l := snowflake.DefaultLayout()
	l.TimeBits, l.SequenceBits = 47, 6 // 64 IDs per ms, so the sequence runs out often
	g := newGenerator(t, snowflake.Settings{Layout: l, Clock: f.clock(), HighWater: &recordingHighWater{}, HighWaterWindow: 50 * time.Millisecond})
	r := rand.New(rand.NewPCG(1, 2))
	var ids []int64
	failed := 0
	for range 50_000 {
		switch n := r.IntN(1000); {
		case n < 2:
			f.step(time.Duration(r.IntN(16_000)-8_000) * time.Microsecond)
		case n < 4:
			f.glitch(-time.Duration(r.IntN(5_000)) * time.Microsecond)
		default:
			f.advance(time.Duration(r.IntN(40)) * time.Microsecond)
		}
		id, err := g.Next(context.Background())
		switch {
		case err == nil:
			ids = append(ids, id)
		case errors.Is(err, snowflake.ErrClockBackwards), errors.Is(err, snowflake.ErrClockBehind):
			failed++
		default:
			t.Fatalf("Next() = %v, want nil or a clock error", err)
		}
	}
	if !slices.IsSorted(ids) {
		t.Errorf("IDs are not increasing")
	}
	unique(t, ids)
	if len(ids) < 25_000 {
		t.Errorf("only %d of 50000 calls succeeded (%d clock errors)", len(ids), failed)
	}
	t.Logf("%d IDs, %d clock errors, stats %+v", len(ids), failed, g.Stats())
}
