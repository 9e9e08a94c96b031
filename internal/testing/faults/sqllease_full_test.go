package faults

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
)

// sqlLeaseTTL is the sql source's lease TTL in leaf-server (sqllease.DefaultTTL).
const sqlLeaseTTL = 10 * time.Second

var sqlClaimedRe = regexp.MustCompile(`msg="claimed snowflake worker ID" .*db_expires=(\S+)`)

// sqlClaimedDB is the database instant of p's claim: the expires_at its
// claim line logs minus the TTL.
func sqlClaimedDB(t *testing.T, p *servertest.Proc) time.Time {
	t.Helper()
	m := sqlClaimedRe.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatalf("no claim line in the log:\n%s", p.Logs())
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	return at.Add(-sqlLeaseTTL)
}

// leaseExpiresMillis reads the expires_at of worker's lease row, Unix ms of
// the database's clock.
func (d *db) leaseExpiresMillis(t *testing.T, worker int64) int64 {
	t.Helper()
	q := `SELECT floor(extract(epoch from expires_at) * 1000)::bigint FROM leaf_worker_lease WHERE worker_id = $1`
	if d.kind == "mysql" {
		// expires_at holds UTC_TIMESTAMP(3): read it as UTC.
		q = `SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', expires_at) DIV 1000 AS SIGNED) FROM leaf_worker_lease WHERE worker_id = ?`
	}
	var ms int64
	if err := d.raw.QueryRowContext(context.Background(), q, worker).Scan(&ms); err != nil {
		t.Fatalf("read expires_at of worker %d: %v", worker, err)
	}
	return ms
}

// leaseExpired reports whether the lease row of worker has expired by the
// database's clock, as a claim judges it.
func (d *db) leaseExpired(t testing.TB, worker int64) bool {
	t.Helper()
	q := `SELECT expires_at < now() FROM leaf_worker_lease WHERE worker_id = $1`
	if d.kind == "mysql" {
		q = `SELECT expires_at < UTC_TIMESTAMP(3) FROM leaf_worker_lease WHERE worker_id = ?`
	}
	var expired bool
	if err := d.raw.QueryRowContext(context.Background(), q, worker).Scan(&expired); err != nil {
		t.Fatalf("read expires_at of worker %d: %v", worker, err)
	}
	return expired
}

// TestSQLLeaseRangeFull: the sql worker-ID source, three servers holding
// --worker-id-min 10 .. --worker-id-max 12 of one database (PostgreSQL and
// MariaDB):
//   - a fourth server finds the range full: it keeps claiming for TTL + 2 s
//     (a crashed holder's lease would have run out by then), then exits 1
//     with "no free worker ID" naming every holder, its owner and expiry
//     (it used to exit at once without naming anyone);
//   - kill -9 one holder (A): a new server (D) started at once gets A's ID,
//     by the database's clock only after A's lease expired.
//
// No ID repeats across the servers under load.
func TestSQLLeaseRangeFull(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			sqlLeaseRangeFull(t, kind)
		})
	}
}

func sqlLeaseRangeFull(t *testing.T, kind string) {
	name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
	d := newDB(t, kind)
	args := []string{"--segment=false", "--worker-id-source", "sql", "--segment-dsn", d.direct,
		"--worker-id-min", "10", "--worker-id-max", "12"}
	startS := func() *servertest.Proc {
		return servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args, StartTimeout: 60 * time.Second})
	}
	cmd := "go test -race -count=1 -run '^TestSQLLeaseRangeFull$/^" + kind + "$' ./faults/"
	newT := func() *tally { return newTally(time.Second+slack, 10*time.Second) }
	load := func(p *servertest.Proc) (*tally, func()) {
		tl := newT()
		return tl, sfSingles(func() *servertest.Proc { return p }, tl, 2, nil)
	}

	a, b, c, wa, wb, wc := startThree(t, startS)
	ta, stopA := load(a)
	tb, stopB := load(b)
	tc, stopC := load(c)

	// A fourth server finds the range full: it waits TTL + 2 s, then exits 1 naming the holders.
	code, out, took := runExit(t, args...)
	if code != 1 || !strings.Contains(out, "no free worker ID") || !strings.Contains(out, "held by: worker 10 by ") ||
		!strings.Contains(out, "worker 12 by ") || !strings.Contains(out, " until ") {
		t.Errorf("fourth server with [10, 12] held: exit %d, want 1 with \"no free worker ID\" and the holders with their expiry:\n%s", code, out)
	}
	if took < sqlLeaseTTL+2*time.Second {
		t.Errorf("fourth server exited after %v, want it to wait TTL + 2 s = %v for a lease to run out", took, sqlLeaseTTL+2*time.Second)
	}
	report.add(t, row{
		Scenario: "4 snowflake worker IDs", Size: "SQL lease (" + name + "), 3 servers hold [10, 12], a fourth starts",
		Errors: map[string]int{fmt.Sprintf("exit %d", code): 1}, Recovery: "n/a (refused at start)", Cmd: cmd,
		Note: fmt.Sprintf("waited and exited after %v (bound TTL + 2 s = 12 s); message: %s", took.Round(time.Millisecond), exitLine(out)),
	})

	// kill -9 A; D, started at once, waits for A's lease.
	stopA()
	a.Kill9()
	killed := time.Now()
	aExpires := time.UnixMilli(d.leaseExpiresMillis(t, wa))
	dp := startS()
	wd := status(t, dp).WorkerID
	recovered := time.Since(killed)
	dClaim := sqlClaimedDB(t, dp)
	if wd != wa {
		t.Errorf("D got worker %d, want the killed A's %d", wd, wa)
	}
	if dClaim.Before(aExpires) {
		t.Errorf("D claimed worker %d at %v (database clock), before A's lease expired at %v", wd, dClaim, aExpires)
	}
	td, stopD := load(dp)
	time.Sleep(2 * time.Second)
	stopB()
	stopC()
	stopD()
	r := check(t, mergeTallies(ta, tb, tc, td), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, fmtRecovery(recovered)
	r.Size = "SQL lease (" + name + "), 3 servers in [10, 12]; A killed -9, D started at once"
	r.Note = fmt.Sprintf("A %d, B %d, C %d; D waited for A's lease (expired %v after the kill by the database's clock) and took worker %d %v after it expired",
		wa, wb, wc, aExpires.Sub(killed).Round(time.Millisecond), wd, dClaim.Sub(aExpires).Round(time.Millisecond))
	report.add(t, r)
}
