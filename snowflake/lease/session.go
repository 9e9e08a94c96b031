package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStopped is returned by [Session.RenewNow] and [Session.WaitNoHistory] after Stop.
var ErrStopped = errors.New("lease: session stopped")

// Config configures Start.
type Config struct {
	// Policy is the lease's timing; zero fields mean the defaults.
	Policy Policy
	// Clock is the local clock; nil means SystemClock{}. Pass the generator's clock (see
	// WithBoot): the generator compares its readings with Expiry. The renewal schedule uses
	// real timers whatever the Clock.
	Clock Clock
	// Renew renews the claim at the coordinator once, within ctx (bounded by Policy.Renew).
	// It returns the TTL the coordinator granted (0 means Policy.TTL; more than Policy.TTL
	// counts as Policy.TTL), or an error: one wrapping ErrLeaseLost when the coordinator says
	// the claim is gone (the loss is then final), any other error is a failed renewal (the
	// next comes Renew/2 later; the deadline does not move). Required. It is never called
	// twice at once.
	Renew func(ctx context.Context) (granted time.Duration, err error)
	// NoHistory says the claim found no history (no previous holder record, no time
	// high-water mark: a first claim, or the coordinator's data was lost or deleted). The
	// Session then holds the claim back: Expiry stays Expired and Ready says why until
	// Policy.NoHistoryWait (TTL + Margin) after the claim has passed on the Clock and on the
	// boot clock (rule 4 of the package doc). Renewals run meanwhile.
	NoHistory bool
	// Logger receives renewal failures and the loss; nil discards them.
	Logger *slog.Logger
}

// Session is one claim's lease: it renews in the background every Policy.Renew from Start
// until Stop or the loss, and answers Expiry, Ready and Lost without I/O. Safe for concurrent
// use.
type Session struct {
	p     Policy
	clock Clock
	renew func(context.Context) (time.Duration, error)
	log   *slog.Logger
	// claimed is the Instant before the claim was sent.
	claimed Instant
	// hold is when a claim without history may serve (Config.NoHistory); holding is true
	// until both its Clock and boot readings have passed.
	hold    Deadline
	holding atomic.Bool

	// dl is the current deadline; nil once lost or stopped.
	dl atomic.Pointer[Deadline]
	// boot is the last boot clock reading of now (nil: none yet).
	boot atomic.Pointer[Instant]
	// lost is closed when the loss is final.
	lost     chan struct{}
	lostOnce sync.Once

	cancel   context.CancelFunc
	done     chan struct{} // closed when the renewal goroutine has returned
	stopOnce sync.Once

	// callMu serialises Renew calls (the loop's and RenewNow's), so the deadline moves only
	// forward and nothing renews after the loss or Stop. Held across the coordinator call.
	callMu sync.Mutex

	mu sync.Mutex // guards the fields below
	// lastRenewal is the Instant before the last confirmed claim or renewal was sent.
	lastRenewal Instant
	// renewals, failures and consecutive count confirmed renewals, failed ones, and failed
	// ones since the last success.
	renewals, failures, consecutive int64
	// lastErr is the last failure or the loss's reason.
	lastErr error
	// lostErr is the loss (wrapping ErrLeaseLost); nil while held.
	lostErr error
	stopped bool
}

// Start begins the lease of a claim the coordinator confirmed: claimed is the Instant read
// just before the claim was sent, granted the TTL it granted (0: Policy.TTL). It starts the
// renewal goroutine (stopped by Stop). Errors: ErrPolicy for an invalid policy or a nil Renew.
func Start(cfg Config, claimed Instant, granted time.Duration) (*Session, error) {
	p := cfg.Policy.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if cfg.Renew == nil {
		return nil, fmt.Errorf("%w: no Renew function", ErrPolicy)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Session{
		p: p, clock: cfg.Clock, renew: cfg.Renew, log: cfg.Logger, claimed: claimed,
		lost: make(chan struct{}), cancel: cancel, done: make(chan struct{}),
		lastRenewal: claimed,
	}
	dl := NewDeadline(claimed, s.valid(granted))
	s.dl.Store(&dl)
	if cfg.NoHistory {
		s.hold = NewDeadline(claimed, p.NoHistoryWait())
		s.holding.Store(true)
		s.log.Warn("claim found no history (no previous holder record, no time high-water mark: a first claim, "+
			"or the coordinator's data was lost): waiting out any previous holder before serving",
			"wait", p.NoHistoryWait(), "until", s.hold.wall.UTC())
	}
	go s.run(ctx)
	return s, nil
}

// valid is how long after a confirmed send the lease backs IDs: the granted TTL (at most
// Policy.TTL) − Margin.
func (s *Session) valid(granted time.Duration) time.Duration {
	if granted <= 0 || granted > s.p.TTL {
		granted = s.p.TTL
	}
	return granted - s.p.Margin
}

// Policy returns the effective policy (defaults applied).
func (s *Session) Policy() Policy { return s.p }

// Claimed returns the Instant read before the claim was sent.
func (s *Session) Claimed() Instant { return s.claimed }

// Expiry is the snowflake.Lease answer: the instant on the Clock from which the claim may no
// longer back IDs (the last confirmed send + granted TTL − Margin, ended earlier by the wall
// or boot clock after a suspend), or Expired (1970) once lost or stopped or past. Two clock
// reads and an atomic load; the generator calls it on every ID.
func (s *Session) Expiry() time.Time {
	dl := s.dl.Load()
	if dl == nil {
		return Expired
	}
	now := s.now()
	if s.held(now) {
		return Expired
	}
	return dl.Expiry(now)
}

// BootRecheck is how often, at most, Expiry reads the boot clock: a boot clock read is a
// system call (about 10 times a time.Now), too dear for every ID. In between it extends the
// last reading by the Clock's elapsed time; it reads again whenever the Clock's reading or
// its wall clock has moved by BootRecheck or more, or not at all, or backwards, since. A
// resume from suspend moves the wall clock (it counts suspended time), so the next Expiry
// reads the boot clock again; should the wall clock also have been stepped back by the
// suspended time, the reading is stale for at most BootRecheck of monotonic time, which the
// time high-water mark covers.
const BootRecheck = time.Millisecond

// now reads the Clock, and the boot clock at most every BootRecheck (see there).
func (s *Session) now() Instant {
	now := s.clock.Now()
	if last := s.boot.Load(); last != nil {
		d, dw := now.Sub(last.Now), now.Round(0).Sub(last.Now.Round(0))
		if d > 0 && d < BootRecheck && dw >= 0 && dw < BootRecheck {
			return Instant{Now: now, Boot: last.Boot + d}
		}
	}
	in := Instant{Now: now, Boot: s.clock.Boot()}
	s.boot.Store(&in)
	return in
}

// held reports whether a claim without history is still held back at now.
func (s *Session) held(now Instant) bool {
	if !s.holding.Load() {
		return false
	}
	if now.Now.Before(s.hold.mono) || now.Boot < s.hold.boot {
		return true
	}
	s.holding.Store(false)
	return false
}

// Lost returns a channel closed when the claim is lost for good.
func (s *Session) Lost() <-chan struct{} { return s.lost }

// Err returns the loss (wrapping ErrLeaseLost and its reason), or nil while the claim is held
// or after a Stop without a loss.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostErr
}

// Ready returns nil while the claim backs IDs; otherwise why not, for an operator: lost (the
// error wraps ErrLeaseLost), stopped, or lapsed (renewals failing; it recovers with the next
// confirmed renewal of the same claim).
func (s *Session) Ready() error {
	s.mu.Lock()
	lostErr, stopped, last, lastErr := s.lostErr, s.stopped, s.lastRenewal, s.lastErr
	s.mu.Unlock()
	switch {
	case lostErr != nil:
		return lostErr
	case stopped:
		return ErrStopped
	}
	now := Read(s.clock)
	if s.held(now) {
		return fmt.Errorf("new claim found no history (a first claim, or the coordinator's data was lost): "+
			"waiting out any previous holder of the worker ID until %s (TTL + margin after the claim); no IDs until then",
			s.hold.wall.UTC().Format(time.RFC3339Nano))
	}
	if dl := s.dl.Load(); dl == nil || dl.Remaining(now) <= 0 {
		msg := fmt.Sprintf("lease may have expired: last confirmed renewal sent %v ago", now.Now.Round(0).Sub(last.Now.Round(0)).Round(time.Millisecond))
		if lastErr != nil {
			msg += " (last error: " + lastErr.Error() + ")"
		}
		return errors.New(msg + "; no IDs until a renewal succeeds")
	}
	return nil
}

// RenewNow renews at once (outside the schedule), waiting for a renewal in flight first, and
// moves the deadline on success. Errors: the loss (wrapping ErrLeaseLost; final), ErrStopped,
// or the failed renewal's.
func (s *Session) RenewNow(ctx context.Context) error {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.mu.Lock()
	lostErr, stopped := s.lostErr, s.stopped
	s.mu.Unlock()
	switch {
	case lostErr != nil:
		return lostErr
	case stopped:
		return ErrStopped
	}
	sent := Read(s.clock)
	granted, err := s.renew(ctx)
	if errors.Is(err, ErrLeaseLost) {
		return s.Lose(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failures++
		s.consecutive++
		s.lastErr = err
		return err
	}
	s.renewals++
	s.consecutive = 0
	s.lastRenewal = sent
	if s.lostErr != nil || s.stopped {
		return nil // lost or stopped while the call was in flight: the deadline stays gone
	}
	next := NewDeadline(sent, s.valid(granted))
	if cur := s.dl.Load(); cur != nil && next.After(*cur) {
		s.dl.Store(&next)
	}
	return nil
}

// Lose makes the loss final (the first reason wins): Expiry is Expired from now on, Lost is
// closed, Ready and Err report it. It returns the loss, wrapping ErrLeaseLost (reason is
// wrapped too; one that already wraps ErrLeaseLost is kept as is). A source calls it when it
// learns of the loss outside Renew (a fenced write refused, a watch event).
func (s *Session) Lose(reason error) error {
	err := reason
	if !errors.Is(err, ErrLeaseLost) {
		err = fmt.Errorf("%w: %w", ErrLeaseLost, reason)
	}
	s.mu.Lock()
	s.dl.Store(nil) // under mu: RenewNow moves the deadline under mu only while not lost
	first := s.lostErr == nil
	if first {
		s.lostErr = err
		s.lastErr = reason
	}
	err = s.lostErr
	s.mu.Unlock()
	s.lostOnce.Do(func() { close(s.lost) })
	if first {
		s.log.Error("worker ID lease lost: no more IDs from this claim", "reason", reason)
	}
	return err
}

// WaitNoHistory waits until a claim without history (Config.NoHistory) is no longer held
// back; it returns at once for a claim with history. The renewals go on meanwhile. Errors:
// ctx's, the loss, ErrStopped.
func (s *Session) WaitNoHistory(ctx context.Context) error {
	for s.held(Read(s.clock)) {
		// Until both the Clock and the boot clock have passed it.
		left := max(s.hold.mono.Sub(s.clock.Now()), s.hold.boot-s.clock.Boot())
		t := time.NewTimer(min(max(left, time.Millisecond), 50*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("lease: waiting out a previous holder: %w", context.Cause(ctx))
		case <-s.lost:
			t.Stop()
			return s.Err()
		case <-t.C:
		}
		s.mu.Lock()
		stopped := s.stopped
		s.mu.Unlock()
		if stopped {
			return ErrStopped
		}
	}
	return nil
}

// run renews every Renew (Renew/2 after a failure) until Stop or the loss.
func (s *Session) run(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(s.p.Renew)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.lost:
			return
		case <-timer.C:
		}
		began := time.Now()
		cctx, cancel := context.WithTimeout(ctx, s.p.Renew)
		err := s.RenewNow(cctx)
		cancel()
		interval := s.p.Renew
		switch {
		case err == nil:
		case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrStopped), ctx.Err() != nil:
			return
		default:
			interval = s.p.Renew / 2
			st := s.Stats()
			s.log.Warn("worker ID lease renewal failed", "err", err,
				"consecutive_failures", st.ConsecutiveFailures, "expires_in", s.Expiry().Sub(s.clock.Now()).Round(time.Millisecond))
		}
		timer.Reset(max(interval-time.Since(began), 0))
	}
}

// Stop ends the renewals, waits for a renewal in flight, and makes Expiry Expired: call it
// before releasing the claim at the coordinator (unless Err() != nil: a lost claim is not
// this process's to release). Later calls do nothing.
func (s *Session) Stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		<-s.done
		s.callMu.Lock()
		defer s.callMu.Unlock()
		s.mu.Lock()
		s.dl.Store(nil)
		s.stopped = true
		s.mu.Unlock()
	})
}

// Stats is a snapshot of a Session for status pages.
type Stats struct {
	// LastRenewal is the Clock reading before the last confirmed claim or renewal was sent.
	LastRenewal time.Time
	// Expires is the deadline on the wall clock (UTC); the zero time once lost or stopped.
	Expires time.Time
	// Renewals counts confirmed renewals; RenewFailures failed ones; ConsecutiveFailures
	// those since the last success.
	Renewals, RenewFailures, ConsecutiveFailures int64
	// LastError is the last failure or the loss's reason; nil when none.
	LastError error
	// Lost is the loss (wrapping ErrLeaseLost); nil while held.
	Lost error
	// Stopped reports that Stop was called.
	Stopped bool
	// HeldUntil is, while a claim without history is held back (Config.NoHistory), when it
	// may serve (wall clock, UTC); the zero time otherwise.
	HeldUntil time.Time
}

// Stats returns a snapshot; it does no I/O.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		LastRenewal: s.lastRenewal.Now, Renewals: s.renewals, RenewFailures: s.failures,
		ConsecutiveFailures: s.consecutive, LastError: s.lastErr, Lost: s.lostErr, Stopped: s.stopped,
	}
	if dl := s.dl.Load(); dl != nil {
		st.Expires = dl.wall.UTC()
	}
	if s.holding.Load() {
		st.HeldUntil = s.hold.wall.UTC()
	}
	return st
}
