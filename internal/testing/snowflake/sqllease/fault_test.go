package sqllease_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/store"
	mysqlstore "github.com/leaf-go/leaf/store/mysql"
	"github.com/leaf-go/leaf/store/postgres"
)

// server is a database server reachable over TCP, so that a fault proxy can
// sit in front of it.
type server struct {
	name string
	// dsn creates a fresh database and returns its DSN.
	dsn func(t testing.TB) string
	// open opens a store on dsn (closed in t.Cleanup).
	open func(t *testing.T, dsn string, migrate bool) sqllease.Store
	// addr returns the host:port of dsn; withAddr the same DSN at addr.
	addr     func(t *testing.T, dsn string) string
	withAddr func(t *testing.T, dsn, addr string) string
}

var servers = []server{
	{
		name: "postgres",
		dsn:  dbtest.Postgres,
		open: func(t *testing.T, dsn string, migrate bool) sqllease.Store {
			s, err := postgres.Open(context.Background(), dsn, migrate)
			if err != nil {
				t.Fatalf("postgres.Open() = %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		addr: func(t *testing.T, dsn string) string { return pgURL(t, dsn).Host },
		withAddr: func(t *testing.T, dsn, addr string) string {
			u := pgURL(t, dsn)
			u.Host = addr
			return u.String()
		},
	},
	{
		name: "mysql",
		dsn:  dbtest.MySQL,
		open: func(t *testing.T, dsn string, migrate bool) sqllease.Store {
			s, err := mysqlstore.Open(context.Background(), dsn, migrate)
			if err != nil {
				t.Fatalf("mysql.Open() = %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		addr: func(t *testing.T, dsn string) string { return mysqlConfig(t, dsn).Addr },
		withAddr: func(t *testing.T, dsn, addr string) string {
			c := mysqlConfig(t, dsn)
			c.Addr = addr
			return "mysql://" + c.FormatDSN()
		},
	},
}

func pgURL(t *testing.T, dsn string) *url.URL {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse %q: %v", dsn, err)
	}
	return u
}

func mysqlConfig(t *testing.T, dsn string) *mysql.Config {
	c, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
	if err != nil {
		t.Fatalf("parse MySQL DSN: %v", err)
	}
	return c
}

// twoWorkers is the default layout with a 1-bit worker field: worker IDs 0
// and 1, so that with 1 held by a filler the taker must wait for 0.
func twoWorkers() snowflake.Layout {
	l := snowflake.DefaultLayout()
	l.WorkerBits, l.SequenceBits = 1, 21
	return l
}

// TestCutConnection is the lease rule of docs/contract.md §3 under a real network fault: a
// Lease and Generator talk to the database through a TCP proxy; the proxy is
// cut. The generator must stop issuing before the database's TTL ends;
// another node may take the worker ID only after that TTL, with a new
// generation; and the taker's IDs never collide with the old holder's,
// because it starts past the high-water mark the old holder persisted.
func TestCutConnection(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			testCutConnection(t, srv)
		})
	}
}

func testCutConnection(t *testing.T, srv server) {
	ctx := context.Background()
	dsn := srv.dsn(t)
	direct := srv.open(t, dsn, true)
	proxy := faultproxy.Start(t, srv.addr(t, dsn))
	via := srv.open(t, srv.withAddr(t, dsn, proxy.Addr()), false)

	layout := twoWorkers()
	opts := sqllease.Options{TTL: 3 * time.Second, Renew: 500 * time.Millisecond, Margin: time.Second, Layout: layout}
	a := start(t, via, with(opts, "A"))
	filler := start(t, direct, sqllease.Options{Owner: "filler", Layout: layout})
	if a.WorkerID() != 0 || filler.WorkerID() != 1 {
		t.Fatalf("A got worker %d, filler %d; want 0 and 1", a.WorkerID(), filler.WorkerID())
	}
	genA := generator(t, a, layout)

	idsA := map[int64]bool{}
	var maxMillisA int64
	record := func(id int64) {
		idsA[id] = true
		maxMillisA = max(maxMillisA, layout.Decompose(id).Millis)
	}
	// Issue through the proxy for a while: renewals and high-water marks
	// reach the row through it.
	for until := time.Now().Add(800 * time.Millisecond); time.Now().Before(until); {
		id, err := genA.Next(ctx)
		if err != nil {
			t.Fatalf("A: Next() before the cut = %v", err)
		}
		record(id)
		time.Sleep(50 * time.Microsecond)
	}

	proxy.Cut()
	cutAt := time.Now()
	var stopAt time.Time
	for stopAt.IsZero() {
		id, err := genA.Next(ctx)
		switch {
		case err == nil:
			record(id)
		case errors.Is(err, snowflake.ErrLeaseExpired):
			stopAt = time.Now()
		case errors.Is(err, snowflake.ErrHighWater):
			// The next mark cannot be stored: refused as well.
		default:
			t.Fatalf("A: Next() after the cut = %v", err)
		}
		if time.Since(cutAt) > 5*time.Second {
			t.Fatalf("A still not refusing with %v 5 s after the cut", snowflake.ErrLeaseExpired)
		}
		time.Sleep(100 * time.Microsecond)
	}
	lastRenewal := a.State().LastRenewal
	// The guarantee: no ID of A carries a millisecond past its lease's
	// validity (last renewal sent + TTL - margin). The IDs' own timestamps
	// say so regardless of how late this loop saw the first refusal.
	if validUntil := lastRenewal.Add(opts.TTL - opts.Margin); maxMillisA > validUntil.UnixMilli() {
		t.Errorf("A issued an ID at %d ms, after its lease's validity ended at %d ms (last renewal + TTL - margin)", maxMillisA, validUntil.UnixMilli())
	}
	// Promptness, with slack for a loaded machine's scheduling.
	if d := stopAt.Sub(lastRenewal); d > opts.TTL-opts.Margin+time.Second {
		t.Errorf("A refused %v after its last successful renewal was sent, want within TTL - margin = %v (+1 s slack)", d, opts.TTL-opts.Margin)
	}
	// A stopped before the TTL ended at the database: nobody can claim yet.
	if l, err := direct.ClaimWorker(ctx, store.Claim{Owner: "probe", MaxWorker: layout.MaxWorker(), TTL: opts.TTL}); !errors.Is(err, store.ErrNoFreeWorker) {
		t.Fatalf("ClaimWorker right after A stopped = %+v, %v; want %v (the database's TTL still running)", l, err, store.ErrNoFreeWorker)
	}

	var b *sqllease.Lease
	for {
		var err error
		b, err = sqllease.Claim(ctx, direct, with(opts, "B"))
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrNoFreeWorker) {
			t.Fatalf("B: Start() = %v", err)
		}
		if time.Since(cutAt) > 10*time.Second {
			t.Fatalf("B could not take worker 0 within 10 s of the cut: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	takeAt := time.Now()
	t.Cleanup(func() { b.Close(context.Background()) })
	if b.WorkerID() != a.WorkerID() || b.Generation() != a.Generation()+1 {
		t.Errorf("B got worker %d generation %d, want worker %d generation %d", b.WorkerID(), b.Generation(), a.WorkerID(), a.Generation()+1)
	}
	// The database's clock is this host's: its expiry is at least TTL after
	// the last renewal A sent.
	if d := takeAt.Sub(lastRenewal); d < opts.TTL-50*time.Millisecond {
		t.Errorf("B took the worker ID %v after A's last renewal, want at least the TTL %v", d, opts.TTL)
	}
	t.Logf("A: %d IDs, refused %v after the cut (%v after its last renewal); B took worker %d %v after the cut",
		len(idsA), stopAt.Sub(cutAt).Round(time.Millisecond), stopAt.Sub(lastRenewal).Round(time.Millisecond),
		b.WorkerID(), takeAt.Sub(cutAt).Round(time.Millisecond))

	genB := generator(t, b, layout)
	if floor := genB.Stats().Floor; floor.UnixMilli() <= maxMillisA {
		t.Errorf("B's floor %d ms is not past A's last issued ms %d", floor.UnixMilli(), maxMillisA)
	}
	minMillisB := int64(1<<63 - 1)
	for n := 0; n < 5000; {
		id, err := genB.Next(ctx)
		if errors.Is(err, snowflake.ErrClockBehindMark) {
			time.Sleep(5 * time.Millisecond) // waiting for A's mark, as designed
			continue
		}
		if err != nil {
			t.Fatalf("B: Next() = %v", err)
		}
		if idsA[id] {
			t.Fatalf("B issued %d, which A issued too", id)
		}
		minMillisB = min(minMillisB, layout.Decompose(id).Millis)
		n++
	}
	if minMillisB <= maxMillisA {
		t.Errorf("B's first ID at %d ms, A's last at %d ms: want B strictly after A", minMillisB, maxMillisA)
	}

	// Back online, A learns that it lost the worker ID and stays refused.
	proxy.Restore(t)
	select {
	case <-a.Lost():
	case <-time.After(5 * time.Second):
		t.Fatalf("A did not notice the loss within 5 s of the proxy coming back: %+v", a.State())
	}
	if _, err := genA.Next(ctx); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Errorf("A: Next() after the loss = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
	if s := filler.State(); s.Lost || s.WorkerID != 1 {
		t.Errorf("filler disturbed: %+v", s)
	}
}

// TestSlowAnswerShortensLease: the local expiry counts from before the
// request was sent, so an answer that takes long makes the lease shorter,
// never longer.
func TestSlowAnswerShortensLease(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			dsn := srv.dsn(t)
			srv.open(t, dsn, true)
			proxy := faultproxy.Start(t, srv.addr(t, dsn))
			via := srv.open(t, srv.withAddr(t, dsn, proxy.Addr()), false)
			const delay = 300 * time.Millisecond
			proxy.Delay(t, delay)
			opts := sqllease.Options{Owner: "slow", TTL: 5 * time.Second, Renew: 2 * time.Second, Margin: time.Second}
			before := time.Now()
			l := start(t, via, opts)
			after := time.Now()
			t.Cleanup(func() { proxy.ClearDelay(t) }) // runs before the Close registered by start
			if after.Sub(before) < delay {
				t.Fatalf("Start took %v through a %v delay", after.Sub(before), delay)
			}
			exp := l.Expiry()
			if exp.Before(before.Add(opts.TTL - opts.Margin)) {
				t.Errorf("Expiry() = %v after Start began, want TTL - margin = %v from when the claim was sent", exp.Sub(before), opts.TTL-opts.Margin)
			}
			if left := exp.Sub(after); left > opts.TTL-opts.Margin-delay {
				t.Errorf("Expiry() is %v after Start returned, want at most TTL - margin - delay = %v", left, opts.TTL-opts.Margin-delay)
			}
		})
	}
}
