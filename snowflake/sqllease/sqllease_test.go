package sqllease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/sqlite"
)

// fast are options that keep the tests short: the generator stops 2.5 s
// after the last successful renewal, the database frees the ID after 3 s.
// Renewals every 200 ms leave room for a race-instrumented run on a loaded
// 2-CPU machine, where one renewal on SQLite can take most of a second (a
// TTL of 1 s made the tests fail there with "lease may have expired").
var fast = sqllease.Options{TTL: 3 * time.Second, Renew: 200 * time.Millisecond, Margin: 500 * time.Millisecond}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), dbtest.SQLite(t), true)
	if err != nil {
		t.Fatalf("sqlite.Open() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func start(t *testing.T, st sqllease.Store, opts sqllease.Options) *sqllease.Lease {
	t.Helper()
	l, err := sqllease.Claim(context.Background(), st, opts)
	if err != nil {
		t.Fatalf("Claim(%+v) = %v", opts, err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// serving waits until l backs IDs: a claim without history is held back TTL + margin, and
// on a loaded machine a renewal may lag past the lease's end for a moment.
func serving(t *testing.T, l *sqllease.Lease) {
	t.Helper()
	if err := l.WaitNoHistory(context.Background()); err != nil {
		t.Fatalf("WaitNoHistory() = %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); l.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Ready() = %v 30 s after the no-history wait", l.Ready())
		}
	}
}

// generator builds a generator on l, once l backs IDs (serving).
func generator(t *testing.T, l *sqllease.Lease, layout snowflake.Layout) *snowflake.Generator {
	t.Helper()
	serving(t, l)
	g, err := snowflake.New(context.Background(), snowflake.Settings{
		Layout: layout, WorkerID: l.WorkerID(), Lease: l, HighWater: l, HighWaterWindow: 300 * time.Millisecond,
		// No test here times a store: on a loaded machine a SQLite write
		// behind the fast renewals can take longer than the default 1 s.
		HighWaterTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("snowflake.New() = %v", err)
	}
	return g
}

func with(o sqllease.Options, owner string) sqllease.Options {
	o.Owner = owner
	return o
}

func TestThreeLeasesThreeWorkers(t *testing.T) {
	st := openSQLite(t)
	seen := map[int64]string{}
	for i, owner := range []string{"a", "b", "c"} {
		l := start(t, st, with(fast, owner))
		if prev, ok := seen[l.WorkerID()]; ok {
			t.Fatalf("%s got worker ID %d, already held by %s", owner, l.WorkerID(), prev)
		}
		seen[l.WorkerID()] = owner
		if l.WorkerID() != int64(i) || l.Generation() != 1 {
			t.Errorf("Claim(%q) = worker %d generation %d, want worker %d generation 1", owner, l.WorkerID(), l.Generation(), i)
		}
	}
}

func TestRenewsUntilClose(t *testing.T) {
	st := openSQLite(t)
	before := time.Now()
	l := start(t, st, with(fast, "a"))
	after := time.Now()
	valid := fast.TTL - fast.Margin
	// A fresh table: no history, so the claim is held back TTL + Margin from its send time.
	if exp, held := l.Expiry(), l.State().HeldUntil; !exp.Equal(lease.Expired) ||
		held.Before(before.Add(fast.TTL+fast.Margin).Round(0)) || held.After(after.Add(fast.TTL+fast.Margin).Round(0)) {
		t.Errorf("Expiry() after Claim = %v, HeldUntil %v; want expired until %v after the claim's send time %v",
			exp, held, fast.TTL+fast.Margin, before)
	}
	g := generator(t, l, snowflake.Layout{})
	if exp := l.Expiry(); exp.Before(time.Now()) || exp.After(time.Now().Add(valid)) {
		t.Errorf("Expiry() after the no-history wait = %v, want within TTL - margin (%v) of now", exp, valid)
	}
	time.Sleep(fast.TTL + 500*time.Millisecond) // past TTL: only renewals keep it alive
	if _, err := g.Next(context.Background()); err != nil {
		t.Fatalf("Next() after %v of renewals = %v, want an ID", fast.TTL+500*time.Millisecond, err)
	}
	// The count is waited for, not assumed from the sleep: a loaded machine
	// may run fewer renewals in it than the 17 it allows.
	for deadline := time.Now().Add(30 * time.Second); l.State().Renewals < 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	s := l.State()
	if s.Renewals < 4 || s.RenewFailures != 0 || s.Lost || s.Closed || s.WorkerID != 0 || s.Generation != 1 || s.Owner != "a" {
		t.Errorf("State() = %+v, want several renewals, no failures, worker 0 generation 1 owner a", s)
	}
	if !s.Expires.Equal(s.LastRenewal.Add(valid)) {
		t.Errorf("State(): Expires %v, want LastRenewal %v + TTL - margin", s.Expires, s.LastRenewal)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Errorf("Next() after Close = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
	if s := l.State(); !s.Closed || !s.Expires.IsZero() {
		t.Errorf("State() after Close = %+v, want closed with a zero expiry", s)
	}
	// Released: the next claim gets worker 0 at once, with the next generation.
	next := start(t, st, with(fast, "b"))
	if next.WorkerID() != 0 || next.Generation() != 2 {
		t.Errorf("Start after Close = worker %d generation %d, want worker 0 generation 2", next.WorkerID(), next.Generation())
	}
	if err := l.Close(context.Background()); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

// TestLostIsFinal: an operator frees the worker ID and another node claims
// it (a new generation); the old Lease notices at its next renewal and never
// issues again.
func TestLostIsFinal(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t)
	old := start(t, st, with(fast, "old"))
	g := generator(t, old, snowflake.Layout{})
	if _, err := g.Next(ctx); err != nil {
		t.Fatalf("Next() = %v", err)
	}
	// A renewal of old that lands between the release and the claim extends the freed row
	// again, and the taker gets another worker ID: then free it again.
	var taker *sqllease.Lease
	for i := 0; i < 10; i++ {
		if err := st.ReleaseWorker(ctx, old.WorkerID(), old.Generation(), 0); err != nil {
			t.Fatal(err)
		}
		if taker = start(t, st, sqllease.Options{Owner: "taker"}); taker.WorkerID() == old.WorkerID() {
			break
		}
	}
	if taker.WorkerID() != old.WorkerID() || taker.Generation() != old.Generation()+1 {
		t.Fatalf("taker got worker %d generation %d, want %d, %d", taker.WorkerID(), taker.Generation(), old.WorkerID(), old.Generation()+1)
	}
	select {
	case <-old.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost() not closed 10 s after another generation took the worker ID")
	}
	if _, err := g.Next(ctx); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Errorf("Next() after the loss = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
	if err := old.Store(ctx, time.Now().Add(time.Hour)); !errors.Is(err, sqllease.ErrLost) {
		t.Errorf("Store() after the loss = %v, want %v", err, sqllease.ErrLost)
	}
	s := old.State()
	renewals := s.Renewals
	if !s.Lost || !s.Expires.IsZero() || s.LastError == "" {
		t.Errorf("State() after the loss = %+v, want lost, zero expiry, the error", s)
	}
	// Only time can tell that the lost Lease renews no more: nothing counts the renewal
	// intervals that go by without one. Watch three of them.
	waittest.Quiet(t, 3*fast.Renew, "the lost Lease kept renewing", func() bool {
		s := old.State()
		return s.Renewals != renewals || s.RenewFailures != 0
	})
	if _, err := g.Next(ctx); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Errorf("Next() long after the loss = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
	if err := old.Close(ctx); err != nil {
		t.Errorf("Close() of a lost lease = %v, want nil (nothing to release)", err)
	}
	if _, err := st.RenewWorker(ctx, taker.WorkerID(), taker.Generation(), time.Second, 0, 0); err != nil {
		t.Errorf("the old lease's Close disturbed the taker: %v", err)
	}
}

// TestHighWaterAcrossHolders: the generator's marks go into the row; the next
// holder of the worker ID loads the mark and issues only past it.
func TestHighWaterAcrossHolders(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t)
	first := start(t, st, with(fast, "first"))
	if got, err := first.Load(ctx); err != nil || !got.IsZero() {
		t.Errorf("Load() on a fresh row = %v, %v, want the zero time", got, err)
	}
	g := generator(t, first, snowflake.Layout{})
	var lastMillis int64
	for range 1000 {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatalf("Next() = %v", err)
		}
		lastMillis = snowflake.Decompose(id).Millis
	}
	mark := first.State().HighWater
	if mark.UnixMilli() <= lastMillis {
		t.Fatalf("row high water %v not past the last issued ms %d", mark, lastMillis)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second := start(t, st, with(fast, "second"))
	got, err := second.Load(ctx)
	if err != nil || !got.Equal(mark) {
		t.Errorf("Load() by the next holder = %v, %v, want %v", got, err, mark)
	}
	g2 := generator(t, second, snowflake.Layout{})
	if floor := g2.Stats().Floor; floor.UnixMilli() <= lastMillis {
		t.Errorf("next holder's floor %v, want past %d", floor, lastMillis)
	}
	// A mark at or below the row's is not written again.
	before := second.State().Renewals
	if err := second.Store(ctx, mark.Add(-time.Second)); err != nil || second.State().Renewals != before {
		t.Errorf("Store(lower mark) = %v with %d renewals, want a no-op", err, second.State().Renewals-before)
	}
}

func TestNoFreeWorker(t *testing.T) {
	st := openSQLite(t)
	layout := snowflake.DefaultLayout()
	layout.WorkerBits, layout.SequenceBits = 1, 21 // worker IDs 0 and 1
	o := with(fast, "x")
	o.Layout = layout
	start(t, st, o)
	start(t, st, o)
	_, err := sqllease.Claim(context.Background(), st, o)
	if !errors.Is(err, store.ErrNoFreeWorker) {
		t.Errorf("third Start with two worker IDs = %v, want %v", err, store.ErrNoFreeWorker)
	}
}

func TestOptions(t *testing.T) {
	st := openSQLite(t)
	wide := snowflake.DefaultLayout()
	wide.WorkerBits, wide.SequenceBits = 17, 5
	tests := []struct {
		name string
		give sqllease.Options
	}{
		{"TTL below the store minimum", sqllease.Options{TTL: 50 * time.Millisecond, Margin: 10 * time.Millisecond, Renew: 10 * time.Millisecond}},
		{"margin as long as TTL", sqllease.Options{TTL: time.Second, Margin: time.Second}},
		{"negative margin", sqllease.Options{Margin: -time.Second}},
		{"renew not shorter than TTL - margin", sqllease.Options{TTL: 10 * time.Second, Margin: 2 * time.Second, Renew: 8 * time.Second}},
		{"negative renew", sqllease.Options{Renew: -time.Second}},
		{"too many worker IDs", sqllease.Options{Layout: wide}},
		{"invalid layout", sqllease.Options{Layout: snowflake.Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 10}}},
		{"owner too long", sqllease.Options{Owner: fmt.Sprintf("%0256d", 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := sqllease.Claim(context.Background(), st, tt.give)
			if !errors.Is(err, sqllease.ErrOptions) {
				if l != nil {
					l.Close(context.Background())
				}
				t.Errorf("Claim(%+v) = %v, want %v", tt.give, err, sqllease.ErrOptions)
			}
		})
	}
	// The defaults are valid: TTL 10 s, renew 3 s, margin 2 s, 1024 worker IDs.
	l := start(t, st, sqllease.Options{})
	if s := l.State(); s.TTL != 10*time.Second || s.Renew != 3*time.Second || s.Margin != 2*time.Second || s.Owner == "" {
		t.Errorf("State() with default options = %+v", s)
	}
}
