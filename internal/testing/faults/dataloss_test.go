package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-go/leaf/internal/etcdtest"
	"github.com/leaf-go/leaf/internal/servertest"
)

// waitReadyz waits until p's /readyz answers 200, or fails after limit; it returns how long
// that took.
func waitReadyz(t testing.TB, p *servertest.Proc, limit time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for readyz(p) != 200 {
		if time.Since(began) > limit {
			code, body, _ := p.Get(context.Background(), "/readyz")
			t.Fatalf("/readyz %d after %v: %s", code, limit, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(began)
}

// TestCoordinatorDataLoss (issue 20 item 4): the coordinator's record of a running holder
// vanishes — etcd: `etcdctl del --prefix` of the namespace (a restore, an operator's mistake);
// SQL: the lease table emptied — and a new server starts at once, with load on both servers and
// every ID collected. The new server's claim finds no history (no holder record, no mark), so
// it serves only TTL + margin after its claim; the old server notices its record is gone at
// its next renewal, stops, and claims again through the normal path without a restart (its new
// claim waits out the same rule). No ID repeats, and the old server serves again.
func TestCoordinatorDataLoss(t *testing.T) {
	t.Parallel()
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		cl := etcdtest.Start(t)
		cli := cl.Client(t)
		const prefix = "/leaf-dataloss"
		args := []string{"--segment=false", "--worker-id-source", "etcd", "--etcd-endpoints", strings.Join(cl.Endpoints(), ","),
			"--etcd-prefix", prefix, "--worker-id-min", "0", "--worker-id-max", "1"}
		dataLoss(t, "etcd, `etcdctl del --prefix` of the namespace under a running server, a new server starts at once",
			"go test -race -count=1 -run '^TestCoordinatorDataLoss$/^etcd$' ./faults/",
			func() *servertest.Proc {
				return servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args, StartTimeout: 60 * time.Second})
			},
			func() {
				if _, err := cli.Delete(context.Background(), prefix, clientv3.WithPrefix()); err != nil {
					t.Fatal(err)
				}
			})
	})
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := newDB(t, kind)
			args := []string{"--segment=false", "--worker-id-source", "sql", "--segment-dsn", d.direct,
				"--worker-id-min", "0", "--worker-id-max", "1"}
			name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
			dataLoss(t, "SQL lease ("+name+"), leaf_worker_lease emptied under a running server, a new server starts at once",
				"go test -race -count=1 -run '^TestCoordinatorDataLoss$/^"+kind+"$' ./faults/",
				func() *servertest.Proc { return start(t, t.TempDir(), args...) },
				func() {
					if _, err := d.raw.ExecContext(context.Background(), "DELETE FROM leaf_worker_lease"); err != nil {
						t.Fatal(err)
					}
				})
		})
	}
}

// dataLoss runs the scenario of TestCoordinatorDataLoss: server A serves under load, wipe
// removes its record, server B starts at once under load; A must claim again and serve, and
// no ID of A or B may repeat.
func dataLoss(t *testing.T, size, cmd string, startSrv func() *servertest.Proc, wipe func()) {
	a := startSrv()
	waitReadyz(t, a, 60*time.Second) // a fresh namespace: the first claim has no history either
	wa := status(t, a).WorkerID
	newT := func() *tally { return newTally(time.Second+slack, 10*time.Second) }
	ta, tb := newT(), newT()
	stopA := sfSingles(func() *servertest.Proc { return a }, ta, 2, nil)
	time.Sleep(time.Second) // a second of load before the fault
	for deadline := time.Now().Add(30 * time.Second); ta.idCount() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("server A issued no ID within 30 s, before the fault")
		}
	}
	ta.startFault()
	wipe()
	b := startSrv()
	tb.endFault() // B's outage: from its start to its steady 200s
	stopB := sfSingles(func() *servertest.Proc { return b }, tb, 2, nil)
	// A stops when its next renewal finds its record gone (at most one renewal interval),
	// then claims again; its outage runs from its first error to its steady 200s.
	detect := ta.waitFirstErr(t, 30*time.Second)
	ta.endFault()
	recA := ta.waitRecovered(t, time.Second, 90*time.Second)
	recB := tb.waitRecovered(t, time.Second, 90*time.Second)
	outA := ta.lastError().Sub(ta.firstErrAt())
	time.Sleep(time.Second) // both serving
	stopA()
	stopB()
	sa, sb := status(t, a), status(t, b)
	if sa.WorkerID == sb.WorkerID {
		t.Errorf("A and B both hold worker ID %d after the re-claim", sa.WorkerID)
	}
	aAfter, _ := issuedAfter(ta, ta.lastError())
	if aAfter == 0 {
		t.Errorf("server A issued no ID after its re-claim (worker %d → %d): it should serve again without a restart", wa, sa.WorkerID)
	}
	r := check(t, mergeTallies(ta, tb), nil, "")
	r.Scenario, r.Size, r.Cmd = "4 snowflake worker IDs", size, cmd
	r.Recovery = "A " + fmtRecovery(recA) + ", B " + fmtRecovery(recB)
	r.Note = fmt.Sprintf("A noticed the loss %.1f s after the wipe and claimed again without a restart (worker %d before, %d after; "+
		"%d IDs after it); B took worker %d. Seconds without snowflake IDs: A %.1f (the new claim's no-history wait), "+
		"B %.1f from its start (TTL + margin)",
		detect.Seconds(), wa, sa.WorkerID, aAfter, sb.WorkerID, outA.Seconds(), (recB).Seconds())
	report.add(t, r)
}
