package snowflake

import "time"

// A lease is checked on more than Go's monotonic clock: that clock (the reading a time.Time
// from time.Now carries, which comparisons such as Before use when both sides have one) stops
// while the host or VM is suspended, so an expiry computed on it stays in the future after a
// resume, however long the suspend lasted, while the coordinator has long handed the worker ID
// on. The lease sources compute their Expiry on the boot and wall clocks as well
// (github.com/leaf-go/leaf/snowflake/lease.Deadline); the generator checks the answer with
// LeaseExpired on both clocks a time.Time can carry.

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
