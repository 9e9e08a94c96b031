package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// fakeClock is a lease.Clock moved by hand: Now and Boot separately, as a suspend moves the
// boot and wall clocks but not Go's monotonic one.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	boot time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), boot: 100 * time.Hour}
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Boot() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.boot }
func (c *fakeClock) advance(now, boot time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(now)
	c.boot += boot
}

// TestDeadlineSuspend: a host suspended for a minute in the middle of a 10 s lease. The
// monotonic clock has not moved; the boot clock and the wall clock have. The lease is over.
func TestDeadlineSuspend(t *testing.T) {
	mono := time.Now() // carries a monotonic reading
	at := lease.Instant{Now: mono, Boot: 100 * time.Hour}
	d := lease.NewDeadline(at, 10*time.Second)
	tests := []struct {
		name     string
		give     lease.Instant
		wantLeft time.Duration
	}{
		{name: "renewed just now", give: at, wantLeft: 10 * time.Second},
		{name: "4 s later", give: lease.Instant{Now: mono.Add(4 * time.Second), Boot: at.Boot + 4*time.Second}, wantLeft: 6 * time.Second},
		{name: "suspended 60 s, monotonic clock still", give: lease.Instant{Now: mono.Add(4 * time.Second), Boot: at.Boot + 64*time.Second}, wantLeft: -54 * time.Second},
		{name: "wall clock stepped back 1 h", give: lease.Instant{Now: mono.Add(4 * time.Second).Round(0).Add(-time.Hour), Boot: at.Boot + 4*time.Second}, wantLeft: 6 * time.Second},
		{name: "wall clock stepped ahead 1 h", give: lease.Instant{Now: mono.Add(4 * time.Second).Round(0).Add(time.Hour), Boot: at.Boot + 4*time.Second}, wantLeft: 6*time.Second - time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.Remaining(tt.give); got != tt.wantLeft {
				t.Errorf("Remaining() = %v, want %v", got, tt.wantLeft)
			}
			exp := d.Expiry(tt.give)
			if expired := exp.Equal(lease.Expired); expired != (tt.wantLeft <= 0) {
				t.Errorf("Expiry() = %v, want expired %v", exp, tt.wantLeft <= 0)
			}
		})
	}
	if got := (lease.Deadline{}).Remaining(at); got > 0 {
		t.Errorf("zero Deadline Remaining = %v, want expired", got)
	}
}

// renewer is a Renew function whose answer the test sets.
type renewer struct {
	mu    sync.Mutex
	err   error
	calls int
}

func (r *renewer) renew(context.Context) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return 0, r.err
}

func (r *renewer) set(err error) { r.mu.Lock(); r.err = err; r.mu.Unlock() }
func (r *renewer) n() int        { r.mu.Lock(); defer r.mu.Unlock(); return r.calls }

var testPolicy = lease.Policy{TTL: time.Second, Renew: 20 * time.Millisecond, Margin: 200 * time.Millisecond}

// TestSessionRenewLapseLose: renewals move the deadline from the instant before they were
// sent; failed ones do not, and the claim lapses at TTL − Margin after the last confirmed
// one; a loss is final (no renewal revives it).
func TestSessionRenewLapseLose(t *testing.T) {
	clock := newFakeClock()
	r := &renewer{}
	s, err := lease.Start(lease.Config{Policy: testPolicy, Clock: clock, Renew: r.renew}, lease.Read(clock), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if got, want := s.Expiry(), clock.Now().Add(800*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Expiry() after the claim = %v, want %v", got, want)
	}
	clock.advance(500*time.Millisecond, 500*time.Millisecond)
	before := r.n()
	waittest.For(t, 10*time.Second, "a renewal after the clock moved", func() bool { return r.n() > before+1 })
	if got, want := s.Expiry(), clock.Now().Add(800*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Expiry() after renewals = %v, want %v", got, want)
	}
	r.set(errors.New("coordinator unreachable"))
	before = r.n()
	waittest.For(t, 10*time.Second, "a failed renewal", func() bool { return r.n() > before+1 })
	if err := s.Ready(); err != nil {
		t.Fatalf("Ready() within the lease = %v, want nil", err)
	}
	clock.advance(800*time.Millisecond, 800*time.Millisecond)
	if got := s.Expiry(); !got.Equal(lease.Expired) {
		t.Fatalf("Expiry() past the deadline = %v, want %v", got, lease.Expired)
	}
	if err := s.Ready(); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Ready() lapsed = %v, want a lapse that is not a loss", err)
	}
	r.set(nil)
	waittest.For(t, 10*time.Second, "recovery after a renewal", func() bool { return s.Ready() == nil })

	r.set(errors.Join(errors.New("row gone"), lease.ErrLeaseLost))
	select {
	case <-s.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost() not closed after a renewal reported the loss")
	}
	r.set(nil)
	if err := s.RenewNow(context.Background()); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("RenewNow() after the loss = %v, want %v", err, lease.ErrLeaseLost)
	}
	if got := s.Expiry(); !got.Equal(lease.Expired) {
		t.Fatalf("Expiry() after the loss = %v, want %v", got, lease.Expired)
	}
	if err := s.Ready(); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Ready() after the loss = %v, want %v", err, lease.ErrLeaseLost)
	}
	if err := s.Err(); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Err() = %v, want %v", err, lease.ErrLeaseLost)
	}
}

// TestSessionSuspend: the boot clock moving past the deadline ends the lease though the
// Clock's monotonic readings did not move.
func TestSessionSuspend(t *testing.T) {
	clock := newFakeClock()
	r := &renewer{err: errors.New("not answering")}
	s, err := lease.Start(lease.Config{Policy: testPolicy, Clock: clock, Renew: r.renew}, lease.Read(clock), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	clock.advance(0, time.Minute)
	if got := s.Expiry(); !got.Equal(lease.Expired) {
		t.Fatalf("Expiry() after a 1 min suspend = %v, want %v", got, lease.Expired)
	}
}

// TestSessionLoseAndStop: Lose from outside Renew is final and wraps the reason; Stop
// expires the lease without a loss.
func TestSessionLoseAndStop(t *testing.T) {
	clock := newFakeClock()
	r := &renewer{}
	s, err := lease.Start(lease.Config{Policy: testPolicy, Clock: clock, Renew: r.renew}, lease.Read(clock), 0)
	if err != nil {
		t.Fatal(err)
	}
	reason := errors.New("key deleted")
	if err := s.Lose(reason); !errors.Is(err, lease.ErrLeaseLost) || !errors.Is(err, reason) {
		t.Fatalf("Lose() = %v, want it to wrap %v and the reason", err, lease.ErrLeaseLost)
	}
	if err := s.Lose(errors.New("second")); !errors.Is(err, reason) {
		t.Fatalf("second Lose() = %v, want the first reason kept", err)
	}
	s.Stop()
	if err := s.Err(); !errors.Is(err, reason) {
		t.Fatalf("Err() after Stop = %v, want the loss", err)
	}

	s2, err := lease.Start(lease.Config{Policy: testPolicy, Clock: clock, Renew: r.renew}, lease.Read(clock), 0)
	if err != nil {
		t.Fatal(err)
	}
	s2.Stop()
	if s2.Err() != nil || !s2.Expiry().Equal(lease.Expired) || !errors.Is(s2.Ready(), lease.ErrStopped) {
		t.Fatalf("after Stop: Err %v, Expiry %v, Ready %v; want nil, expired, stopped", s2.Err(), s2.Expiry(), s2.Ready())
	}
}

// TestWaitNoHistory: a claim without history serves only after TTL + Margin on both the
// Clock and the boot clock (the renewals keep the lease alive meanwhile).
func TestWaitNoHistory(t *testing.T) {
	clock := newFakeClock()
	r := &renewer{}
	s, err := lease.Start(lease.Config{Policy: testPolicy, Clock: clock, Renew: r.renew, NoHistory: true}, lease.Read(clock), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if got := s.Expiry(); !got.Equal(lease.Expired) {
		t.Fatalf("Expiry() of a claim without history = %v, want %v until TTL + Margin", got, lease.Expired)
	}
	if err := s.Ready(); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Ready() of a held claim = %v, want a reason that is not a loss", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.WaitNoHistory(context.Background()) }()
	clock.advance(testPolicy.NoHistoryWait(), testPolicy.NoHistoryWait()-time.Millisecond)
	// It must still be waiting. Only time can tell: it looks at the clocks on a 50 ms
	// timer of its own, and the clock's readings do not tell its looks from the renewals';
	// so watch a few rounds of that timer.
	if !waittest.Quiet(t, 240*time.Millisecond, "WaitNoHistory returned before the boot clock passed TTL + Margin", func() bool { return len(done) > 0 }) {
		t.Fatalf("WaitNoHistory() = %v", <-done)
	}
	clock.advance(0, time.Millisecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitNoHistory() = %v", err)
		}
		if err := s.Ready(); err != nil {
			t.Fatalf("Ready() after the wait = %v", err)
		}
		if got := s.Expiry(); got.Equal(lease.Expired) {
			t.Fatalf("Expiry() after the wait = %v, want a live lease", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitNoHistory did not return after TTL + Margin")
	}
	if got, want := testPolicy.NoHistoryWait(), 1200*time.Millisecond; got != want {
		t.Errorf("NoHistoryWait() = %v, want %v", got, want)
	}
}

// TestPolicyValidate: the ranges, and defaults for the zero value.
func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		give lease.Policy
		ok   bool
	}{
		{name: "defaults", give: lease.Policy{}, ok: true},
		{name: "margin = TTL", give: lease.Policy{TTL: time.Second, Margin: time.Second, Renew: 10 * time.Millisecond}},
		{name: "renew = TTL - margin", give: lease.Policy{TTL: time.Second, Margin: 500 * time.Millisecond, Renew: 500 * time.Millisecond}},
		{name: "negative margin", give: lease.Policy{TTL: time.Second, Margin: -1, Renew: 10 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.WithDefaults().Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, lease.ErrPolicy)) {
				t.Errorf("Validate(%+v) = %v, want ok %v", tt.give, err, tt.ok)
			}
		})
	}
}

// TestBootTime: the boot clock is readable and does not run backwards.
func TestBootTime(t *testing.T) {
	a := lease.BootTime()
	time.Sleep(2 * time.Millisecond)
	if b := lease.BootTime(); a <= 0 || b < a+2*time.Millisecond {
		t.Errorf("BootTime() = %v then %v after 2 ms, want positive and advancing", a, b)
	}
}
