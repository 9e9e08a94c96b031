// Package clocktest provides a fake snowflake.Clock for tests: time moves only when a test sets
// it or when code under test sleeps, so clock steps are exact and tests never block.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a fake clock. Sleep advances the fake time by d instead of blocking and records d.
// The zero value reads the zero time; use New. Safe for concurrent use.
type Clock struct {
	mu sync.Mutex // guards now, sleeps, frozen
	// now is the fake current time.
	now time.Time
	// sleeps records every Sleep argument, in call order.
	sleeps []time.Duration
	// frozen makes Sleep record but not advance the time (a stuck clock).
	frozen bool
	// suspended is the time Suspend added to the boot clock only.
	suspended time.Duration
}

// New returns a Clock that reads t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// NewMillis returns a Clock that reads the Unix-millisecond instant ms.
func NewMillis(ms int64) *Clock { return New(time.UnixMilli(ms)) }

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep records d and, for d > 0 and an unfrozen clock, advances the fake time by d. It never
// blocks.
func (c *Clock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if d > 0 && !c.frozen {
		c.now = c.now.Add(d)
	}
}

// Set sets the fake time to t (earlier or later).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Add moves the fake time by d; a negative d steps it back.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Boot returns a fake boot clock (lease.Clock): the fake time as Unix ns plus every Suspend,
// so it moves with Sleep, Set and Add (back too: it is a fake) and alone with Suspend.
func (c *Clock) Boot() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.now.UnixNano()) + c.suspended
}

// Suspend moves the boot clock by d and leaves Now alone: a host suspended for d as Go's
// monotonic clock sees it (it stands still), while a boot clock counts the suspension.
func (c *Clock) Suspend(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.suspended += d
}

// Freeze makes later Sleep calls leave the time unchanged (true) or advance it again (false).
func (c *Clock) Freeze(frozen bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = frozen
}

// Sleeps returns a copy of the recorded Sleep arguments.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// ResetSleeps forgets the recorded Sleep arguments.
func (c *Clock) ResetSleeps() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = nil
}
