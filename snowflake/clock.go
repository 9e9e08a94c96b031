package snowflake

import (
	"runtime"
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

// SystemClock is the real Clock: time.Now and time.Sleep.
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
