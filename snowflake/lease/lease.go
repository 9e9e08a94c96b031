package lease

import (
	"errors"
	"fmt"
	"time"
)

// ErrLeaseLost is the one sentinel of a lost claim: every source's loss error wraps it, so
// errors.Is(err, ErrLeaseLost) holds whichever coordinator said so (a SQL row of another
// generation or deleted, an etcd key taken over or deleted, a lease etcd no longer knows, an
// expired ZooKeeper session). It is final for that claim: claim again to issue again.
var ErrLeaseLost = errors.New("worker ID lease lost")

// ErrPolicy is returned by [Policy.Validate] (and [Start]) for durations outside their ranges.
var ErrPolicy = errors.New("lease: invalid policy")

// Defaults of the zero Policy fields (docs/contract.md §3.6: a 10 s lease renewed every 3 s).
const (
	// DefaultTTL is the time each claim and renewal grants at the coordinator.
	DefaultTTL = 10 * time.Second
	// DefaultRenew is the interval between renewals.
	DefaultRenew = 3 * time.Second
	// DefaultMargin is how much earlier than the TTL the holder stops issuing: it covers
	// clock-rate differences between holder and coordinator and the time a pause takes to be
	// noticed.
	DefaultMargin = 2 * time.Second
)

// Policy is a lease's timing. The zero value of a field means its default.
type Policy struct {
	// TTL is what each claim and renewal grants at the coordinator, > Margin; 0 means
	// DefaultTTL. A crashed holder's worker ID is free again TTL after its last renewal.
	TTL time.Duration
	// Renew is the interval between renewals, > 0 and < TTL − Margin; 0 means DefaultRenew.
	// After a failed renewal the next comes after Renew/2; each is given at most Renew.
	Renew time.Duration
	// Margin is how much earlier than TTL the holder stops issuing, > 0 and < TTL; 0 means
	// DefaultMargin.
	Margin time.Duration
}

// WithDefaults returns p with its zero fields set to the defaults.
func (p Policy) WithDefaults() Policy {
	if p.TTL == 0 {
		p.TTL = DefaultTTL
	}
	if p.Renew == 0 {
		p.Renew = DefaultRenew
	}
	if p.Margin == 0 {
		p.Margin = DefaultMargin
	}
	return p
}

// Validate checks p (after WithDefaults): 0 < Margin < TTL and 0 < Renew < TTL − Margin (else
// the lease would lapse between renewals). The error wraps ErrPolicy.
func (p Policy) Validate() error {
	switch {
	case p.TTL <= 0:
		return fmt.Errorf("%w: TTL %v not positive", ErrPolicy, p.TTL)
	case p.Margin <= 0 || p.Margin >= p.TTL:
		return fmt.Errorf("%w: margin %v not in (0, TTL %v)", ErrPolicy, p.Margin, p.TTL)
	case p.Renew <= 0 || p.Renew >= p.TTL-p.Margin:
		return fmt.Errorf("%w: renew interval %v not in (0, TTL - margin = %v): the lease would lapse between renewals",
			ErrPolicy, p.Renew, p.TTL-p.Margin)
	}
	return nil
}

// NoHistoryWait is how long a claim that found no history waits before it serves: TTL +
// Margin, the longest a previous holder (with the same policy) could still be issuing after
// its record vanished: it renewed last before that, so it stops at most TTL − Margin later on
// its own clock, and Margin twice over covers the clocks' rates and the claim's travel.
func (p Policy) NoHistoryWait() time.Duration { return p.TTL + p.Margin }
