package lease

import "time"

// Clock is a lease's time source: Now for the instants a generator compares Expiry with (pass
// the generator's clock: with the system's, readings carry Go's monotonic clock, immune to
// wall steps), Boot for time that counts a suspended host. Implementations are safe for
// concurrent use and cheap: Expiry reads both on every ID.
type Clock interface {
	// Now is the current instant; its wall reading (Round(0)) counts suspended time.
	Now() time.Time
	// Boot is the time since boot including suspended time, never stepped (see SystemClock).
	Boot() time.Duration
}

// SystemClock is the real Clock: time.Now and the system's boot clock (BootTime). Its zero
// value is ready.
type SystemClock struct{}

var _ Clock = SystemClock{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Boot returns BootTime().
func (SystemClock) Boot() time.Duration { return BootTime() }

// WithBoot returns a Clock that reads now for Now and the system boot clock for Boot: the
// generator's clock (snowflake.Clock, a test's fake) made a lease Clock. A nil now means
// time.Now.
func WithBoot(now func() time.Time) Clock {
	if now == nil {
		return SystemClock{}
	}
	return funcClock(now)
}

type funcClock func() time.Time

func (f funcClock) Now() time.Time      { return f() }
func (f funcClock) Boot() time.Duration { return BootTime() }

// Instant is one moment read on a Clock's two clocks: take it just before a claim or renewal
// is sent, so that the request's travel counts against the lease.
type Instant struct {
	// Now is Clock.Now.
	Now time.Time
	// Boot is Clock.Boot.
	Boot time.Duration
}

// Read returns the current Instant of c.
func Read(c Clock) Instant { return Instant{Now: c.Now(), Boot: c.Boot()} }

// Deadline is the end of a lease on three clocks: the Clock's readings (monotonic with the
// system clock), the wall clock (the readings' Round(0)) and the boot clock. The zero value is
// expired. Comparable; immutable.
type Deadline struct {
	mono time.Time     // Clock end, as read (monotonic reading kept)
	wall time.Time     // wall-clock end, no monotonic reading
	boot time.Duration // boot-clock end
}

// NewDeadline returns the deadline d after the instant at (d: TTL − Margin, or less).
func NewDeadline(at Instant, d time.Duration) Deadline {
	return Deadline{mono: at.Now.Add(d), wall: at.Now.Round(0).Add(d), boot: at.Boot + d}
}

// IsZero reports whether dl is the zero (expired) Deadline.
func (dl Deadline) IsZero() bool { return dl.mono.IsZero() && dl.wall.IsZero() && dl.boot == 0 }

// After reports whether dl ends later than o on the Clock's readings (what a renewal must
// achieve to move the deadline).
func (dl Deadline) After(o Deadline) bool { return dl.mono.After(o.mono) }

// Remaining returns how long dl still backs IDs at now: the least of what is left on the
// three clocks; ≤ 0 means expired. A suspend advances the boot and wall clocks, so it shortens
// the lease; a wall clock stepped back does not lengthen it (the others bound it); one stepped
// forward shortens it (safe).
func (dl Deadline) Remaining(now Instant) time.Duration {
	if dl.IsZero() {
		return 0
	}
	return min(dl.mono.Sub(now.Now), dl.wall.Sub(now.Now.Round(0)), dl.boot-now.Boot)
}

// Expiry returns dl as an instant on the clock that read now: now.Now + Remaining (so a
// generator comparing its later readings with it stops at the earliest of the three ends),
// or Expired when nothing remains, never the zero time.
func (dl Deadline) Expiry(now Instant) time.Time {
	left := dl.Remaining(now)
	if left <= 0 {
		return Expired
	}
	return now.Now.Add(left)
}

// Expired is what Expiry returns once a lease no longer backs IDs: an instant long past
// (1970-01-01T00:00:00Z), and not the zero time, which means "never expires" to
// snowflake.Lease.
var Expired = time.Unix(0, 0).UTC()
