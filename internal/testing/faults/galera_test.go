package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbproctest"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/galeratest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// galeraParams go into every DSN of the Galera scenarios: causality checks
// for reads, so that segment's max_id read on a node that a server moved to
// sees the writes the server made through the node it left (the fix
// leaf-server's engine warning names).
const galeraParams = "wsrep_sync_wait=1"

// TestGalera runs leaf-servers on a private 3-node MariaDB Galera cluster
// (internal/galeratest), multi-master: server i lists the nodes starting with
// node i, so each server writes through a different node and the hot row's
// updates conflict across nodes (Galera's certification conflicts, 1213 at
// COMMIT), which the store re-runs. One cluster, three phases in order:
//
//   - many servers: steps 1, 10 and 1000, 3 clients per server per tag for
//     4 s; 0 errors, 0 duplicates, every ID inside an audited committed
//     range. The same load on 3 servers sharing one private MariaDB gives
//     the baseline for BENCHMARKS.md (IDs per second, same run).
//   - kill -9 of the node server 2 writes through, mid-load: the servers
//     carry on through the other nodes (errors only -3 within
//     --wait-timeout), no duplicate; the node restarts, rejoins (IST) and
//     serves an allocation again.
//   - isolation of node 3 (gmcast.isolate): it leaves the primary component
//     and refuses statements; every ID served lies inside a range that the
//     primary component committed (audited on node 1); healed, node 3 syncs
//     and holds the same row.
func TestGalera(t *testing.T) {
	t.Parallel()
	c := galeratest.New(t, 3)
	d := galeraDB(t, c)
	const wait = time.Second
	servers := make([]*servertest.Proc, 3)
	for i := range servers {
		servers[i] = start(t, t.TempDir(), "--segment-dsn", c.HostsDSN(galeraParams, i, (i+1)%3, (i+2)%3),
			"--migrate=false", "--snowflake=false", "--wait-timeout", wait.String())
	}

	t.Run("many-servers", func(t *testing.T) {
		base := dbprocMariaDB(t)
		var baseServers []*servertest.Proc
		for range 3 {
			baseServers = append(baseServers, start(t, t.TempDir(), "--segment-dsn", base.direct,
				"--migrate=false", "--snowflake=false", "--wait-timeout", wait.String()))
		}
		const run = 4 * time.Second
		for _, step := range []int64{1, 10, 1000} {
			tag := "many" + strconv.FormatInt(step, 10)
			d.create(t, tag, 1, step)
			base.create(t, tag, 1, step)
			before, retriesBefore := conflicts(t, c), serverRetries(t, servers)
			gl := loadFor(servers, tag, 3, run, wait)
			after, retriesAfter := conflicts(t, c), serverRetries(t, servers)
			baseBefore := serverRetries(t, baseServers)
			bl := loadFor(baseServers, tag, 3, run, wait)
			baseAfter := serverRetries(t, baseServers)
			r := check(t, gl, d, tag)
			if len(r.Errors) > 0 {
				t.Errorf("step %d: errors %v with every node up, want none", step, r.Errors)
			}
			rb := check(t, bl, base, tag)
			// The servers' own count of re-runs (leaf_store_retries_total):
			// each Galera conflict reaches the store as 1213, a deadlock.
			deadlocks := retriesAfter[store.RetryDeadlock] - retriesBefore[store.RetryDeadlock]
			if after > before && deadlocks == 0 {
				t.Errorf("step %d: %d Galera conflicts, but the servers counted no deadlock retry on /metrics", step, after-before)
			}
			var reruns, baseReruns uint64
			for _, cause := range store.RetryCauses() {
				reruns += retriesAfter[cause] - retriesBefore[cause]
				baseReruns += baseAfter[cause] - baseBefore[cause]
			}
			perM := 0.0
			if r.IDs > 0 {
				perM = float64(reruns) / float64(r.IDs) * 1e6
			}
			r.Scenario = "11 Galera: many servers, 3 nodes (multi-master)"
			r.Size = fmt.Sprintf("3 servers on 3 nodes, step %d, 3 clients per server, %v", step, run)
			r.Recovery = "n/a"
			r.Note = fmt.Sprintf("%d committed segments; %d Galera conflicts (certification failures and brute-force aborts); "+
				"%d transactions re-run by the servers (leaf_store_retries_total: %d deadlock; %.0f per 10^6 IDs); "+
				"baseline 3 servers on one MariaDB: %d IDs (Galera/MariaDB = %.2f), %d re-run",
				len(d.ranges(t, tag)), after-before, reruns, deadlocks, perM, rb.IDs, float64(r.IDs)/float64(max(rb.IDs, 1)), baseReruns)
			r.Cmd = "go test -race -count=1 -run '^TestGalera$/^many-servers$' ./faults/"
			report.add(t, r)
		}
	})

	t.Run("kill-node", func(t *testing.T) {
		const tag = "kill"
		d.create(t, tag, 1, 100)
		tl := newTally(wait+slack, 10*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { drive(ctx, targets(servers, tag, 3, tl)) })
		time.Sleep(2 * time.Second)
		tl.startFault()
		c.Nodes[1].Kill9(t)
		time.Sleep(6 * time.Second) // past Galera's failure detection (about 3 s here)
		c.Nodes[1].Start(t)
		tl.endFault()
		time.Sleep(2 * time.Second)
		rec := tl.waitRecovered(t, time.Second, 20*time.Second)
		cancel()
		wg.Wait()
		r := check(t, tl, d, tag)
		for k := range r.Errors {
			if k != "500 -3" && k != "503 -3" {
				t.Errorf("error %q, want only Leaf -3 (no segment ready in time)", k)
			}
		}
		// The node serves again: an allocation through it alone.
		checkNodeServes(t, c.Nodes[1], d, tag)
		r.Scenario = "11 Galera: kill -9 of a node"
		r.Size = "3 servers on 3 nodes (multi-host DSNs), step 100, kill -9 of node 2 for 6 s, then its restart (IST)"
		r.Recovery = fmtRecovery(rec)
		r.Note = fmt.Sprintf("%d committed segments; the restarted node allocates again", len(d.ranges(t, tag)))
		r.Cmd = "go test -race -count=1 -run '^TestGalera$/^kill-node$' ./faults/"
		report.add(t, r)
	})

	t.Run("isolate-node", func(t *testing.T) {
		const tag = "isolate"
		d.create(t, tag, 1, 100)
		tl := newTally(wait+slack, 10*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { drive(ctx, targets(servers, tag, 3, tl)) })
		time.Sleep(2 * time.Second)
		tl.startFault()
		n := c.Nodes[2]
		n.Isolate(t)
		n.WaitStatus(t, "wsrep_cluster_status", "non-Primary", 20*time.Second)
		time.Sleep(3 * time.Second) // the servers work through the primary component
		n.Heal(t)
		tl.endFault()
		time.Sleep(2 * time.Second)
		rec := tl.waitRecovered(t, time.Second, 20*time.Second)
		cancel()
		wg.Wait()
		// check audits on node 1, in the primary component throughout.
		r := check(t, tl, d, tag)
		for k := range r.Errors {
			if k != "500 -3" && k != "503 -3" {
				t.Errorf("error %q, want only Leaf -3 (no segment ready in time)", k)
			}
		}
		checkNodeServes(t, n, d, tag)
		r.Scenario = "11 Galera: a node leaves the primary component"
		r.Size = "3 servers on 3 nodes (multi-host DSNs), step 100, node 3 isolated (gmcast.isolate) for about 6 s"
		r.Recovery = fmtRecovery(rec)
		r.Note = fmt.Sprintf("%d committed segments, audited on node 1; every ID inside one", len(d.ranges(t, tag)))
		r.Cmd = "go test -race -count=1 -run '^TestGalera$/^isolate-node$' ./faults/"
		report.add(t, r)
	})
}

// galeraDB is database galeratest.DB on c, migrated and audited through node 1.
func galeraDB(t *testing.T, c *galeratest.Cluster) *db {
	t.Helper()
	d := &db{kind: "mysql", direct: c.Nodes[0].DSN() + "&" + galeraParams}
	d.raw = openRaw(t, "mysql", strings.TrimPrefix(d.direct, "mysql://"))
	st, err := dsn.Open(context.Background(), d.direct, true)
	if err != nil {
		t.Fatalf("open %s: %v", dsn.Redact(d.direct), err)
	}
	t.Cleanup(func() { st.Close() })
	d.st = st
	dbtest.InstallAudit(t, d.raw, d.kind)
	// Galera does not replicate the trigger; a trigger fires only on the
	// node where the transaction runs (replicated rows fire none), and its
	// audit rows replicate with the transaction. So the same trigger on
	// every other node, created there alone (wsrep_on=OFF).
	for _, n := range c.Nodes[1:] {
		raw := openRaw(t, "mysql", strings.TrimPrefix(n.DSN(), "mysql://"))
		conn, err := raw.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"SET SESSION wsrep_on = OFF", auditTrigger} {
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				t.Fatalf("%s on %s: %v", q, n.Name(), err)
			}
		}
		conn.Close()
	}
	return d
}

// auditTrigger is dbtest.InstallAudit's MariaDB trigger.
const auditTrigger = `CREATE TRIGGER leaf_audit AFTER UPDATE ON leaf_alloc FOR EACH ROW
	INSERT INTO leaf_alloc_audit VALUES (NEW.biz_tag, OLD.max_id, NEW.max_id)`

// dbprocMariaDB is the baseline: a private MariaDB of the same build and
// settings class as the Galera nodes, migrated and audited.
func dbprocMariaDB(t *testing.T) *db {
	t.Helper()
	return privateDB(t, dbproctest.New(t, dbproctest.MariaDB))
}

// targets are clients per server asking tag's single IDs into tl.
func targets(servers []*servertest.Proc, tag string, clients int, tl *tally) []target {
	var out []target
	for _, p := range servers {
		for range clients {
			out = append(out, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/" + tag, tally: tl})
		}
	}
	return out
}

// loadFor drives clients per server on tag for run and returns the tally.
func loadFor(servers []*servertest.Proc, tag string, clients int, run, wait time.Duration) *tally {
	tl := newTally(max(wait, loadTimeout)+slack, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	drive(ctx, targets(servers, tag, clients, tl))
	return tl
}

// conflicts sums Galera's certification failures and brute-force aborts
// over the nodes: each made a transaction fail that the store re-ran.
func conflicts(t *testing.T, c *galeratest.Cluster) int64 {
	t.Helper()
	var n int64
	for _, nd := range c.Nodes {
		st, err := nd.Status()
		if err != nil {
			t.Fatalf("%s status: %v", nd.Name(), err)
		}
		for _, k := range []string{"wsrep_local_cert_failures", "wsrep_local_bf_aborts"} {
			v, _ := strconv.ParseInt(st[k], 10, 64)
			n += v
		}
	}
	return n
}

// checkNodeServes allocates tag once through node n alone and checks that
// the range starts at or above the max_id node 1 holds (n caught up).
func checkNodeServes(t *testing.T, n *galeratest.Node, d *db, tag string) {
	t.Helper()
	before := d.maxID(t, tag)
	st, err := dsn.Open(context.Background(), n.DSN()+"&"+galeraParams, false)
	if err != nil {
		t.Fatalf("open %s alone: %v", n.Name(), err)
	}
	defer st.Close()
	a, err := st.Allocate(context.Background(), tag, 0, 0)
	if err != nil {
		t.Fatalf("Allocate(%q) through %s: %v", tag, n.Name(), err)
	}
	if a.Start() < before {
		t.Errorf("Allocate(%q) through %s = [%d, %d), below max_id %d of node 1: the node did not catch up", tag, n.Name(), a.Start(), a.MaxID, before)
	}
}
