package snowflake

import (
	"time"

	"golang.org/x/sys/unix"
)

// Suspend-proof leases. Go's monotonic clock (the reading a time.Time from time.Now carries,
// which comparisons such as Before use when both sides have one) is CLOCK_MONOTONIC on Linux,
// which stops while the host or VM is suspended. A lease expiry computed as renewal + TTL on it
// stays in the future after a resume, however long the suspend lasted, while the database or
// etcd has long granted the worker ID to another node. So a lease is checked on two clocks:
// CLOCK_BOOTTIME, which counts suspended time and is never stepped, and the wall clock, which
// counts suspended time too; it is over when either says so.

// LeaseClock reads the time since boot including suspended time. Implementations must be safe
// for concurrent use and cheap (called on every Expiry).
type LeaseClock interface {
	Boot() time.Duration
}

// BootClock is the system LeaseClock: Linux's CLOCK_BOOTTIME (clock_gettime, a vDSO call).
type BootClock struct{}

var _ LeaseClock = BootClock{}

// Boot returns CLOCK_BOOTTIME. Should the call fail (it does not on Linux ≥ 2.6.39), it returns
// the largest duration, so that every LeaseDeadline reads as expired: failing safe.
func (BootClock) Boot() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 1<<63 - 1
	}
	return time.Duration(ts.Nano())
}

// LeaseDeadline is the end of a lease on two clocks: the wall clock (monotonic reading
// stripped) and a LeaseClock. Make it from readings taken before the renewal request was sent,
// so that the request's travel time counts against the lease. The zero value is expired.
type LeaseDeadline struct {
	wall time.Time     // wall-clock end, no monotonic reading
	boot time.Duration // LeaseClock end
}

// NewLeaseDeadline returns the deadline ttl after the instant read as wallNow (any clock
// reading; its monotonic part is dropped) and bootNow (LeaseClock.Boot).
func NewLeaseDeadline(wallNow time.Time, bootNow, ttl time.Duration) LeaseDeadline {
	return LeaseDeadline{wall: wallNow.Round(0).Add(ttl), boot: bootNow + ttl}
}

// Remaining returns how long the lease still backs IDs at the readings wallNow and bootNow:
// the smaller of what is left on each clock; ≤ 0 means expired. A suspend advances both the
// LeaseClock and the wall clock, so it shortens the lease; a wall clock stepped back does not
// lengthen it (the LeaseClock bounds it); a wall clock stepped forward shortens it (safe).
func (d LeaseDeadline) Remaining(wallNow time.Time, bootNow time.Duration) time.Duration {
	if d.boot == 0 && d.wall.IsZero() {
		return 0
	}
	return min(d.boot-bootNow, d.wall.Sub(wallNow.Round(0)))
}

// Expiry returns the deadline as a Lease.Expiry on the clock that read now: now + Remaining,
// so that the generator's comparison with its own later readings (monotonic) ends the lease at
// the earlier of the two clocks' ends. A lease source calls it from Expiry with its clock's
// current reading and LeaseClock.Boot(). An expired deadline returns an instant ≤ now, never
// the zero time.
func (d LeaseDeadline) Expiry(now time.Time, bootNow time.Duration) time.Time {
	return now.Add(d.Remaining(now, bootNow))
}

// LeaseExpired reports whether a lease ending at exp no longer backs IDs at now, on both
// clocks a time.Time can carry: the monotonic reading (when both have one; immune to wall
// steps, blind to suspend) and the wall clock (counts suspend). Expired when either says so;
// the zero exp never expires. The generator checks Settings.Lease with it.
func LeaseExpired(now, exp time.Time) bool {
	if exp.IsZero() {
		return false
	}
	return !now.Before(exp) || !now.Round(0).Before(exp.Round(0))
}
