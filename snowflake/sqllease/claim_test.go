package sqllease_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/store"
)

// offsetClock is the system clock moved by a fixed offset: a host whose clock is off.
type offsetClock time.Duration

func (c offsetClock) Now() time.Time      { return time.Now().Add(time.Duration(c)) }
func (c offsetClock) Boot() time.Duration { return lease.BootTime() }

// logBuffer collects a logger's text output; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRange: --worker-id-min/--worker-id-max: claims stay in the range; a range outside the
// layout is refused before anything is claimed.
func TestRange(t *testing.T) {
	st := openSQLite(t)
	o := with(fast, "r")
	o.Workers = &sqllease.Range{Min: 700, Max: 701}
	for _, want := range []int64{700, 701} {
		if l := start(t, st, o); l.WorkerID() != want {
			t.Errorf("Claim(range 700..701) = worker %d, want %d", l.WorkerID(), want)
		}
	}
	if _, err := sqllease.Claim(context.Background(), st, o); !errors.Is(err, store.ErrNoFreeWorker) || !strings.Contains(err.Error(), "700..701") {
		t.Errorf("Start with 700..701 taken = %v, want %v naming 700..701", err, store.ErrNoFreeWorker)
	}
	for _, r := range []sqllease.Range{{Min: -1, Max: 3}, {Min: 5, Max: 4}, {Min: 0, Max: 1024}} {
		o := with(fast, "bad")
		o.Workers = &r
		if l, err := sqllease.Claim(context.Background(), st, o); !errors.Is(err, sqllease.ErrOptions) {
			if l != nil {
				l.Close(context.Background())
			}
			t.Errorf("Claim(range %d..%d, 10 worker bits) = %v, want %v", r.Min, r.Max, err, sqllease.ErrOptions)
		}
	}
}

// TestPeerClock: a live peer whose clock is 30 s ahead makes Start refuse, naming it; 2 s
// ahead is within --max-peer-clock-skew's 10 s; 0 turns the check off.
func TestPeerClock(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ahead   time.Duration
		max     time.Duration
		refused bool
	}{
		{"30s ahead", 30 * time.Second, 10 * time.Second, true},
		{"30s behind", -30 * time.Second, 10 * time.Second, true},
		{"2s ahead", 2 * time.Second, 10 * time.Second, false},
		{"check off", 30 * time.Second, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := openSQLite(t)
			peer := with(fast, "peer-host:8080")
			peer.Clock = offsetClock(tt.ahead)
			p := start(t, st, peer)
			o := with(fast, "new")
			o.MaxPeerClockSkew = tt.max
			l, err := sqllease.Claim(context.Background(), st, o)
			if tt.refused {
				if l != nil {
					l.Close(context.Background())
				}
				if !errors.Is(err, snowflake.ErrPeerClockSkew) || !strings.Contains(err.Error(), "worker 0 (peer-host:8080 claim ") {
					t.Fatalf("Start with a peer %v off = %v, want %v naming worker 0 (peer-host:8080)", tt.ahead, err, snowflake.ErrPeerClockSkew)
				}
				// Nothing was claimed: the next free worker ID is still 1.
				if got := start(t, st, with(fast, "probe")); got.WorkerID() != 1 {
					t.Errorf("after the refusal the next claim got worker %d, want 1", got.WorkerID())
				}
				return
			}
			if err != nil {
				t.Fatalf("Start with a peer %v off, max skew %v = %v, want a lease", tt.ahead, tt.max, err)
			}
			l.Close(context.Background())
			_ = p
		})
	}
}

// TestPeerClockAfterRenewals: the check uses the clock the peer reported with its last
// renewal, not only its claim, and the age of that report does not count as skew. The peer
// renews every 2 s; once it has renewed, the new server claims when that report is at least
// 700 ms old, with a max skew of 300 ms: a check that counted the report's age would refuse.
// (Before, the test slept 3 renewals of 200 ms and then required one: a loaded machine
// could miss that, and a 100 ms bound left the write's own latency little room.)
func TestPeerClockAfterRenewals(t *testing.T) {
	st := openSQLite(t)
	peer := with(fast, "peer")
	peer.TTL, peer.Renew, peer.Margin = 10*time.Second, 2*time.Second, time.Second
	peer.Clock = offsetClock(0)
	p := start(t, st, peer)
	const age = 700 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := p.State()
		if s.Renewals > 0 {
			// The scenario's wait: let the report of this renewal age; the next one is
			// due 2 s after it.
			time.Sleep(time.Until(s.LastRenewal.Add(age)))
			if p.State().LastRenewal.Equal(s.LastRenewal) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer did not renew within 30 s (or never held a report %v old): %+v", age, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	o := with(fast, "new")
	o.MaxPeerClockSkew = 300 * time.Millisecond // tighter than the report's age (>= 700 ms)
	l, err := sqllease.Claim(context.Background(), st, o)
	if err != nil {
		t.Fatalf("Start next to a peer with the same clock whose report is %v old, max skew %v = %v", age, o.MaxPeerClockSkew, err)
	}
	l.Close(context.Background())
}

// TestFarAheadMark: a holder whose clock jumped a day ahead stored a high-water mark a day
// ahead; the next server claims another free worker ID instead of waiting a day, says so in
// the log, and gives the skipped one back. With no other free ID it keeps the skipped one.
func TestFarAheadMark(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t)
	jumped := with(fast, "jumped")
	jumped.Clock = offsetClock(24 * time.Hour)
	j := start(t, st, jumped)
	serving(t, j)
	g, err := snowflake.New(ctx, snowflake.Settings{Source: j, Clock: clocktest.New(time.Now().Add(24 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var logs logBuffer
	o := with(fast, "next")
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	n := start(t, st, o)
	if n.WorkerID() != 1 {
		t.Errorf("Start after a day-ahead mark on worker 0 = worker %d, want 1", n.WorkerID())
	}
	if fl, _ := n.Load(ctx); fl.After(time.Now().Add(time.Minute)) {
		t.Errorf("the kept worker ID's floor is %v, far ahead", fl)
	}
	if !strings.Contains(logs.String(), "far ahead of the clock") || !strings.Contains(logs.String(), "worker_id=0") {
		t.Errorf("log = %q, want a line naming worker 0's mark far ahead", logs.String())
	}
	// Worker 0 was given back: a claim that does not skip gets it at once.
	keep := with(fast, "keeper")
	keep.MaxMarkAhead = -1
	if k := start(t, st, keep); k.WorkerID() != 0 {
		t.Errorf("Claim(never skip) = worker %d, want 0 (the skipped ID given back)", k.WorkerID())
	}

	// Only worker 0 in range, and its mark a day ahead: kept, with the wait, and logged.
	st2 := openSQLite(t)
	one := &sqllease.Range{Min: 0, Max: 0}
	jumped.Workers = one
	j2 := start(t, st2, jumped)
	if err := j2.Store(ctx, time.Now().Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := j2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	o.Workers = one
	k := start(t, st2, o)
	if fl, _ := k.Load(ctx); k.WorkerID() != 0 || fl.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("Start with only worker 0 = worker %d floor %v, want worker 0 with its day-ahead floor", k.WorkerID(), fl)
	}
	if !strings.Contains(logs.String(), "no other free snowflake worker ID") {
		t.Errorf("log = %q, want the line saying it keeps the far-ahead ID", logs.String())
	}
}

// TestSuspendExpiry: Go's monotonic clock stands still while the host is suspended. With
// the lease's clock frozen (monotonic time seen by the process) and the boot clock moved past
// the lease's validity (the suspension), Expiry lies in the past and the generator refuses.
func TestSuspendExpiry(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t)
	mono := clocktest.New(time.Now())
	o := with(fast, "sleeper")
	o.Clock = mono
	l := start(t, st, o)
	// A fresh row has no history: the claim serves TTL + Margin later on both clocks, and
	// the next renewal (real timers, sent at the fake time) moves the deadline past it.
	mono.Add(fast.TTL + fast.Margin)
	serving(t, l)
	g, err := snowflake.New(ctx, snowflake.Settings{Source: l, Clock: mono})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Next(ctx); err != nil {
		t.Fatalf("Next() before the suspension = %v", err)
	}
	mono.Suspend(fast.TTL) // suspended for a TTL: the database has freed the worker ID
	if exp := l.Expiry(); !exp.Before(mono.Now()) {
		t.Errorf("Expiry() after a suspension past the TTL = %v, want the past (monotonic now %v)", exp, mono.Now())
	}
	if _, err := g.Next(ctx); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Errorf("Next() after the suspension = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
	if err := l.Ready(); err == nil {
		t.Error("Ready() after the suspension = nil, want an error")
	}
}
