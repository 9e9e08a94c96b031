package snowflake

import "time"

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

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep calls time.Sleep(d); it returns at once for d <= 0.
func (SystemClock) Sleep(d time.Duration) { time.Sleep(d) }
