package sqllease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// leaseDBs are the databases the sql source runs on, each a fresh private
// database per test.
var leaseDBs = []struct {
	name string
	dsn  func(testing.TB) string
}{
	{"sqlite", dbtest.SQLite},
	{"postgres", dbtest.Postgres},
	{"mysql", dbtest.MySQL},
}

func openLeaseStore(t *testing.T, d string) sqllease.Store {
	t.Helper()
	st, err := dsn.Open(context.Background(), d, true)
	if err != nil {
		t.Fatalf("open %s: %v", dsn.Redact(d), err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// live are the options of the holders that keep renewing in these tests:
// a TTL long enough that a renewal is never missed on a loaded machine.
var live = sqllease.Options{TTL: 3 * time.Second, Renew: 200 * time.Millisecond, Margin: 500 * time.Millisecond,
	Workers: &sqllease.Range{Min: 4, Max: 6}}

// TestFullRangeWaitsThenNamesHolders: with every worker ID of the range
// held by live servers, Start keeps claiming for ClaimWait (default TTL +
// 2 s), then fails with store.ErrNoFreeWorker naming every holder, its
// owner and its expiry. The claimer's TTL is store.MinLeaseTTL, so its
// default wait is 2.1 s.
func TestFullRangeWaitsThenNamesHolders(t *testing.T) {
	t.Parallel()
	for _, db := range leaseDBs {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			st := openLeaseStore(t, db.dsn(t))
			for _, owner := range []string{"srv-a", "srv-b", "srv-c"} {
				start(t, st, with(live, owner))
			}
			o := sqllease.Options{Owner: "srv-d", TTL: store.MinLeaseTTL, Renew: 20 * time.Millisecond, Margin: 30 * time.Millisecond,
				Workers: live.Workers}
			wait := store.MinLeaseTTL + sqllease.DefaultClaimSlack
			t0 := time.Now()
			l, err := sqllease.Claim(context.Background(), st, o)
			took := time.Since(t0)
			if err == nil {
				l.Close(context.Background())
				t.Fatalf("Start with 4..6 held = worker %d, want %v", l.WorkerID(), store.ErrNoFreeWorker)
			}
			if !errors.Is(err, store.ErrNoFreeWorker) {
				t.Fatalf("Start with 4..6 held = %v, want %v", err, store.ErrNoFreeWorker)
			}
			for i, owner := range []string{"srv-a", "srv-b", "srv-c"} {
				if want := fmt.Sprintf("worker %d by %s claim ", 4+i, owner); !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if !strings.Contains(err.Error(), "4..6") || !strings.Contains(err.Error(), "after waiting") {
				t.Errorf("error %q does not name the range and the wait", err)
			}
			if took < wait {
				t.Errorf("Start gave up after %v, want it to keep claiming for ClaimWait = TTL + 2 s = %v", took, wait)
			}
			t.Logf("gave up after %v: %v", took.Round(time.Millisecond), err)

			// ClaimWait < 0 fails at once: one claim, no wait.
			o.ClaimWait = -1
			if _, err := sqllease.Claim(context.Background(), st, o); !errors.Is(err, store.ErrNoFreeWorker) || !strings.Contains(err.Error(), "worker 4 by srv-a") {
				t.Errorf("Start with ClaimWait < 0 = %v, want %v naming the holders", err, store.ErrNoFreeWorker)
			}
		})
	}
}

// TestCrashedHolderFreesAfterExpiry: one holder of a full range crashes
// (its renewals stop; here a bare claim that is never renewed), and a new
// server started while its lease runs gets its worker ID after the lease
// expired, by the database's clock, never before; the live holders keep
// theirs, so the three IDs stay distinct.
func TestCrashedHolderFreesAfterExpiry(t *testing.T) {
	t.Parallel()
	for _, db := range leaseDBs {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			st := openLeaseStore(t, db.dsn(t))
			a := start(t, st, with(live, "srv-a"))
			b := start(t, st, with(live, "srv-b"))
			crashed, err := st.ClaimWorker(context.Background(), store.Claim{Owner: "srv-crashed",
				MinWorker: live.Workers.Min, MaxWorker: live.Workers.Max, TTL: time.Second})
			if err != nil {
				t.Fatalf("claim of the holder that crashes: %v", err)
			}
			d := start(t, st, with(live, "srv-d")) // waits for the crashed holder's lease
			if d.WorkerID() != crashed.WorkerID {
				t.Fatalf("new server got worker %d, want the crashed holder's %d", d.WorkerID(), crashed.WorkerID)
			}
			if d.Generation() != crashed.Generation+1 {
				t.Errorf("new server's generation %d, want %d (the crashed holder's + 1)", d.Generation(), crashed.Generation+1)
			}
			// The claim's database instant is its expires_at - TTL.
			claimedAt := d.State().DBExpires.Add(-live.TTL)
			if claimedAt.Before(crashed.ExpiresAt) {
				t.Errorf("worker %d claimed at %v (database clock), before the crashed holder's lease expired at %v",
					d.WorkerID(), claimedAt, crashed.ExpiresAt)
			}
			ids := map[int64]string{a.WorkerID(): "a", b.WorkerID(): "b"}
			if _, dup := ids[d.WorkerID()]; dup || len(ids) != 2 {
				t.Errorf("worker IDs a %d, b %d, d %d: want three distinct", a.WorkerID(), b.WorkerID(), d.WorkerID())
			}
		})
	}
}
