package snowflake

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the generator's source of wall-clock time and of waiting. The generator reads
// Now().UnixMilli() (wall clock, like Leaf's System.currentTimeMillis, so that a clock step is
// seen) and calls Sleep while it waits for a clock step back or for the next millisecond.
// Implementations must be safe for concurrent use. internal/clocktest has a fake whose Sleep
// advances the fake time instead of blocking.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

// SystemClock is the plain real Clock: time.Now and time.Sleep. The generator's default is
// AnchoredClock, which reads the same time for less.
type SystemClock struct{}

var _ Clock = SystemClock{}

// spinLimit is the longest Sleep that SystemClock spins through instead of parking on a timer.
const spinLimit = time.Millisecond

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d; it returns at once for d <= 0. Waits up to 1 ms (the wait for the next
// millisecond) yield the processor in a loop (runtime.Gosched) until d has passed on the
// monotonic clock, as Leaf's tilNextMillis and Twitter's spin do: a timer may overshoot by up to
// a millisecond on some hosts, which would cost a quarter of the layout's IDs per millisecond.
// Longer waits call time.Sleep.
func (SystemClock) Sleep(d time.Duration) {
	if d > spinLimit {
		time.Sleep(d)
		return
	}
	for start := time.Now(); time.Since(start) < d; {
		runtime.Gosched()
	}
}

// Re-anchoring rules of AnchoredClock.
const (
	// AnchorRecheck is how often, in monotonic time, AnchoredClock compares its reading with the
	// wall clock: a wall-clock step is seen at most this late (and on the first Now after a
	// Sleep). One time.Now per millisecond costs less than 0.01% of it.
	AnchorRecheck = time.Millisecond
	// AnchorTolerance is the smallest difference between AnchoredClock's reading and the wall
	// clock that counts as a step and moves the anchor. Smaller differences are the skew between
	// the wall and monotonic reads of one time.Now (tens of ns); following them would move the
	// reading back by nanoseconds across a millisecond boundary now and then, and the generator
	// would wait out a 1 ms clock step that never happened.
	AnchorTolerance = 100 * time.Microsecond
)

// AnchoredClock is the generator's default Clock: the wall clock read as an anchor (one
// time.Now) plus the monotonic time elapsed since, so that most readings cost one monotonic
// read instead of time.Now's wall and monotonic reads (compare BenchmarkAnchoredClockNow with
// BenchmarkSystemClockNow).
//
// It is still the wall clock: at most every AnchorRecheck of monotonic time, and on the first
// Now after a Sleep, it reads time.Now again and, when that differs from its own reading by
// AnchorTolerance or more (the wall clock was set forward or back, or the host was suspended),
// re-reads once to confirm the step and moves the anchor to it. So a step back is seen within
// a millisecond, and the generator's clock-back rules and high-water mark apply as they do with
// time.Now. Differences below AnchorTolerance are not followed; the reading then stays at most
// that far from the wall clock. NTP slewing changes the rate of the wall and monotonic clocks
// alike and needs no re-anchoring.
//
// Readings carry Go's monotonic reading (that of the moment they are taken), so comparisons with
// the lease expiry of sqllease stay immune to wall-clock steps. Sleep is SystemClock's. Use
// NewAnchoredClock; safe for concurrent use.
type AnchoredClock struct {
	src clockSource

	// anchor is the current anchor; replaced, never modified.
	anchor atomic.Pointer[anchor]
	// checkAt is the monotonic reading (ns, src.mono) from which Now compares with the wall
	// clock again; 0 forces the comparison.
	checkAt atomic.Int64

	// mu serialises the comparisons with the wall clock (recheck); the fast path takes no lock.
	mu sync.Mutex
}

var _ Clock = (*AnchoredClock)(nil)

// anchor is a wall-clock reading and the monotonic reading of the same instant.
type anchor struct {
	wall time.Time
	mono time.Duration
}

// clockSource is what AnchoredClock reads: the real clocks, or fakes in tests.
type clockSource struct {
	// read returns the wall clock and the monotonic reading (since an arbitrary fixed origin) of
	// one instant.
	read func() (time.Time, time.Duration)
	// mono returns the monotonic reading alone, on read's scale.
	mono func() time.Duration
	// sleep waits for d.
	sleep func(d time.Duration)
}

// NewAnchoredClock returns an AnchoredClock anchored at time.Now().
func NewAnchoredClock() *AnchoredClock {
	origin := time.Now()
	return newAnchoredClock(clockSource{
		read:  func() (time.Time, time.Duration) { t := time.Now(); return t, t.Sub(origin) },
		mono:  func() time.Duration { return time.Since(origin) },
		sleep: SystemClock{}.Sleep,
	})
}

func newAnchoredClock(src clockSource) *AnchoredClock {
	c := &AnchoredClock{src: src}
	wall, mono := src.read()
	c.anchor.Store(&anchor{wall: wall, mono: mono})
	c.checkAt.Store(int64(mono + AnchorRecheck))
	return c
}

// Now returns the anchor's wall time plus the monotonic time elapsed since it; see the type's
// doc for when it compares with time.Now.
func (c *AnchoredClock) Now() time.Time {
	a := c.anchor.Load()
	m := c.src.mono()
	if int64(m) < c.checkAt.Load() {
		return a.wall.Add(m - a.mono)
	}
	return c.recheck()
}

// recheck compares the anchored reading with the wall clock, moves the anchor when the wall
// clock has stepped, and returns the reading.
func (c *AnchoredClock) recheck() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.anchor.Load()
	wall, m := c.src.read()
	if off := a.offset(wall, m); off.Abs() >= AnchorTolerance {
		// A thread descheduled between the wall and the monotonic read of one time.Now makes a
		// false step; a second reading that shows the same step confirms it.
		wall2, m2 := c.src.read()
		off2 := a.offset(wall2, m2)
		if off2.Abs() < AnchorTolerance {
			m = m2 // the first reading was the odd one: keep the anchor
		} else {
			if (off2 - off).Abs() >= AnchorTolerance {
				// Not settled yet (stepped again between the reads): follow the latest
				// reading and compare again on the next Now.
				a = &anchor{wall: wall2, mono: m2}
				c.anchor.Store(a)
				c.checkAt.Store(0)
				return wall2
			}
			a = &anchor{wall: wall2, mono: m2}
			c.anchor.Store(a)
			m = m2
		}
	}
	c.checkAt.Store(int64(m + AnchorRecheck))
	return a.wall.Add(m - a.mono)
}

// offset is how far the wall clock reading wall, taken at monotonic reading m, is ahead of the
// anchored reading at m (negative: behind).
func (a *anchor) offset(wall time.Time, m time.Duration) time.Duration {
	return time.Duration(wall.UnixNano() - a.wall.Add(m-a.mono).UnixNano())
}

// Sleep waits for d as SystemClock.Sleep does, then makes the next Now compare with the wall
// clock, so that a caller that waited for the clock (a step back, the next millisecond) reads
// the wall clock's current answer.
func (c *AnchoredClock) Sleep(d time.Duration) {
	c.src.sleep(d)
	c.checkAt.Store(0)
}
