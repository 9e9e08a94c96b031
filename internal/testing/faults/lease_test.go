package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/internal/zktest"
)

// readyz returns the status of GET /readyz.
func readyz(p *servertest.Proc) int {
	code, _, err := p.Get(context.Background(), "/readyz")
	if err != nil {
		return 0
	}
	return code
}

// TestSQLLeaseLost: two servers take snowflake worker IDs from SQL leases on
// one database (PostgreSQL, or MariaDB, which renews in four round trips:
// BEGIN, UPDATE, SELECT, COMMIT); server A reaches it through a fault proxy,
// which is cut. First for 3 s (inside the 10 s TTL): A may fail while its
// high-water store cannot reach the database, and serves again by itself.
// Then past the TTL: A's snowflake route must fail (non-200, Leaf code)
// before the TTL ends (its local lease ends TTL − margin after the last
// renewal) and /readyz must answer 503 past it; B keeps serving. After the
// TTL a third server C starts and takes the free worker ID (A's), and from
// then on A must not answer a single snowflake ID (fencing); when the proxy
// comes back, A's renewal finds another generation in the row: the lease is
// lost for good (status API) and /readyz answers 503. No snowflake ID of A,
// B and C repeats.
func TestSQLLeaseLost(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			sqlLeaseLost(t, kind)
		})
	}
}

func sqlLeaseLost(t *testing.T, kind string) {
	name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
	d := newDB(t, kind)
	px := faultproxy.Start(t, d.upstream())
	args := []string{"--segment=false", "--worker-id-source", "sql"}
	a := start(t, t.TempDir(), append(args, "--segment-dsn", d.via(t, px))...)
	b := start(t, t.TempDir(), append(args, "--segment-dsn", d.direct)...)
	a.WaitReady(t, time.Minute) // fresh rows have no history: held back TTL + margin
	b.WaitReady(t, time.Minute)
	wa, wb := status(t, a).WorkerID, status(t, b).WorkerID
	if wa == wb {
		t.Fatalf("A and B share worker ID %d", wa)
	}
	newT := func() *tally { return newTally(time.Second+slack, 10*time.Second) }
	cmd := "go test -race -count=1 -run '^TestSQLLeaseLost$/^" + kind + "$' ./faults/"

	// A short cut (3 s, inside the lease).
	short, shortB := newT(), newT()
	stopA := sfSingles(func() *servertest.Proc { return a }, short, 2, nil)
	stopB := sfSingles(func() *servertest.Proc { return b }, shortB, 2, nil)
	time.Sleep(time.Second)
	short.startFault()
	px.Cut()
	time.Sleep(3 * time.Second)
	px.Restore(t)
	short.endFault()
	rec := short.waitRecovered(t, time.Second, 15*time.Second)
	stopA()
	stopB()
	checkWorker(t, short, wa)
	checkWorker(t, shortB, wb)
	if w := status(t, a).WorkerID; w != wa {
		t.Errorf("A's worker ID changed to %d after a short cut", w)
	}
	if _, errs, _, _ := shortB.snapshot(); len(errs) > 0 {
		t.Errorf("server B (not cut) had errors %v", errs)
	}
	r := check(t, mergeTallies(short, shortB), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, fmtRecovery(rec)
	r.Size = "SQL lease (" + name + "), 2 servers, A cut from the database for 3 s (inside the 10 s TTL)"
	r.Note = fmt.Sprintf("A keeps worker %d (/readyz %d after), B %d", wa, readyz(a), wb)
	report.add(t, r)

	// Past the TTL.
	ta, tb, tc := newT(), newT(), newT()
	stopA = sfSingles(func() *servertest.Proc { return a }, ta, 2, nil)
	stopB = sfSingles(func() *servertest.Proc { return b }, tb, 2, nil)
	time.Sleep(time.Second)
	ta.startFault()
	px.Cut()
	failAfter := ta.waitFirstErr(t, 12*time.Second)
	if failAfter >= 10*time.Second {
		t.Errorf("server A failed %v after the cut, want before the 10 s TTL", failAfter)
	}
	readyWhileExpired := readyz(a)
	// C after the TTL: once A's row has expired by the database's clock, not
	// after a fixed time.
	waittest.For(t, 30*time.Second, "A's lease row expiring in the database", func() bool { return d.leaseExpired(t, wa) })
	// Past the TTL with the database still cut, A's lease may have been taken
	// over: A must not call itself ready (a load balancer would keep sending
	// it snowflake requests it can only refuse).
	readyPastTTL := readyz(a)
	if readyPastTTL != 503 {
		t.Errorf("server A: /readyz %d past the lease TTL with the database cut, want 503", readyPastTTL)
	}
	c := start(t, t.TempDir(), append(args, "--segment-dsn", d.direct)...)
	wc := status(t, c).WorkerID
	aAtC := ta.idCount()
	stopC := sfSingles(func() *servertest.Proc { return c }, tc, 2, nil)
	px.Restore(t)
	restored := time.Now()
	lostAfter := time.Duration(-1)
	for time.Since(restored) < 10*time.Second {
		// Lost: the status page says so, or A has already claimed another worker ID (it
		// claims again by itself; the new claim has no history and is held back, 503).
		if (leaseLost(a) || status(t, a).WorkerID != wa) && readyz(a) == 503 {
			lostAfter = time.Since(restored)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lostAfter < 0 && wc == wa {
		t.Errorf("server A: lease not lost (status API) with /readyz 503 within 10 s after its worker ID %d went to server C", wa)
	}
	if wc == wa {
		// A must not answer a single ID with C's worker ID. Its refusals are
		// the witness, not a fixed time: each one is a request it would have
		// answered. (With another worker ID, C leaves A's lease to A.)
		refused := ta.errCount()
		waittest.For(t, 10*time.Second, "server A refusing 100 more requests", func() bool { return ta.errCount() >= refused+100 })
	}
	stopA()
	stopB()
	stopC()
	if n := ta.idCount() - aAtC; n > 0 && wc == wa {
		t.Errorf("server A answered %d snowflake IDs after C took its worker ID %d", n, wa)
	}
	if wc == wb {
		t.Errorf("server C took worker ID %d, which live server B holds", wc)
	}
	checkWorker(t, ta, wa)
	checkWorker(t, tb, wb)
	checkWorker(t, tc, wc)
	if _, errs, _, _ := tb.snapshot(); len(errs) > 0 {
		t.Errorf("server B (not cut) had errors %v", errs)
	}
	r = check(t, mergeTallies(short, shortB, ta, tb, tc), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, "A: lost, claims again by itself"
	r.Size = "SQL lease (" + name + "), 3 servers, A cut from the database past the 10 s TTL, C started after it"
	r.Note = fmt.Sprintf("A (worker %d) failing %v after the cut; /readyz of A at the first error %d, past the TTL %d; C took worker %d, B %d; A answered %d IDs after C's start; A's lease lost (/readyz 503) %v after the database came back",
		wa, failAfter.Round(time.Millisecond), readyWhileExpired, readyPastTTL, wc, wb, ta.idCount()-aAtC, lostAfter.Round(time.Millisecond))
	report.add(t, r)
}

// TestSQLLeaseKillDuringRenewal: a server with the SQL lease source reaches
// its database through a proxy that delays every answer, so each lease
// renewal (and each high-water store, which is a renewal) takes that long
// (on MariaDB four times: BEGIN, UPDATE, SELECT, COMMIT). The server is
// killed with -9 while a high-water store is in flight, and restarted on
// the same data dir: kills times, then once more after the TTL, so that the
// last start takes back the first worker ID with the high-water mark the
// interrupted renewal may have committed. No ID repeats.
func TestSQLLeaseKillDuringRenewal(t *testing.T) {
	t.Parallel()
	for _, db := range []struct {
		kind   string
		trips  int // round trips of a renewal
		kills  int
		delays []time.Duration
	}{
		{"postgres", 1, 3, []time.Duration{200 * time.Millisecond, time.Second}},
		{"mysql", 4, 2, []time.Duration{200 * time.Millisecond}},
	} {
		t.Run(db.kind, func(t *testing.T) {
			t.Parallel()
			for _, delay := range db.delays {
				t.Run(delay.String(), func(t *testing.T) {
					t.Parallel()
					sqlLeaseKill(t, db.kind, db.trips, db.kills, delay)
				})
			}
		})
	}
}

func sqlLeaseKill(t *testing.T, kind string, trips, kills int, delay time.Duration) {
	name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
	d := newDB(t, kind)
	px := faultproxy.Start(t, d.upstream())
	dir := t.TempDir()
	args := []string{"--segment=false", "--worker-id-source", "sql", "--segment-dsn", d.via(t, px)}
	all := newTally(0, 0)
	var workers []int64
	hits := 0
	for round := 0; round <= kills; round++ {
		if round == kills {
			// The last start comes once the killed servers' leases have
			// expired by the database's clock (not after a fixed time), so
			// that it may take the first worker ID back.
			for _, w := range workers {
				waittest.For(t, 30*time.Second, fmt.Sprintf("the lease of worker %d expiring in the database", w), func() bool { return d.leaseExpired(t, w) })
			}
		}
		px.ClearDelay(t)
		p := start(t, dir, args...)
		p.WaitReady(t, time.Minute) // a worker ID without history is held back TTL + margin
		px.Delay(t, delay)
		w := status(t, p).WorkerID
		workers = append(workers, w)
		// A store waits on a renewal: trips round trips, each delayed.
		tl := newTally(time.Duration(trips)*delay+time.Second+slack, 10*time.Second)
		var killing sync.Mutex
		dead := false
		connOK := func() bool { killing.Lock(); defer killing.Unlock(); return dead }
		stop := sfSingles(func() *servertest.Proc { return p }, tl, 3, connOK)
		loaded := time.Now()
		for deadline := loaded.Add(10 * time.Second); tl.idCount() < 100 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if round == kills {
			time.Sleep(time.Until(loaded.Add(2 * time.Second)))
			stop()
			p.Kill9()
		} else {
			// Kill while the high-water store, a lease renewal whose
			// answer the proxy delays, is in flight.
			if killDuringStore(p, delay, 15*time.Second) {
				hits++
			}
			killing.Lock()
			dead = true
			killing.Unlock()
			p.Kill9()
			stop()
		}
		checkWorker(t, tl, w)
		ids, errs, worst, bad := tl.snapshot()
		for _, b := range bad {
			t.Errorf("round %d: %s", round, b)
		}
		all.add(ids, errs, worst)
	}
	if hits == 0 {
		t.Errorf("no kill landed while a high-water store (a renewal) was in flight")
	}
	if workers[kills] != workers[0] {
		t.Logf("last start took worker %d, not the first one %d", workers[kills], workers[0])
	}
	r := check(t, all, nil, "")
	r.Scenario, r.Recovery = "3 process killed", "restart"
	r.Cmd = "go test -race -count=1 -run '^TestSQLLeaseKillDuringRenewal$/^" + kind + "$/^" + delay.String() + "$' ./faults/"
	r.Size = fmt.Sprintf("SQL lease source (%s +%v per answer), kill -9 during a lease renewal, %d kills, then a restart after the TTL", name, delay, kills)
	r.Note = fmt.Sprintf("%d/%d kills landed while a high-water store (a renewal) was in flight; worker IDs by round %v; conn = request cut by the kill", hits, kills, workers)
	report.add(t, r)
}

// killDuringStore waits, with p under load, until a high-water store (a
// lease renewal whose answers the proxy delays) is in flight, and reports
// whether that happened within limit; the caller kills p right after. Since
// issue 15 the generator stores the next mark in the background once the
// clock is within 1 s (a third of the 3 s window) of the stored one, so that
// requests rarely wait on it: the store begins at mark − 1 s and lasts at
// least delay, and the status page shows the same mark and store count
// until it has returned.
func killDuringStore(p *servertest.Proc, delay, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		mark, stores, ok := highWater(p)
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		time.Sleep(time.Until(mark.Add(-time.Second + delay/2)))
		if m, n, ok := highWater(p); ok && m.Equal(mark) && n == stores {
			return true
		}
	}
	return false
}

// highWater reads the generator's stored mark and store count from p's
// status page.
func highWater(p *servertest.Proc) (time.Time, int64, bool) {
	code, body, err := p.Get(context.Background(), "/api/v1/snowflake/status")
	if err != nil || code != 200 {
		return time.Time{}, 0, false
	}
	var s struct {
		HighWater       time.Time `json:"highWater"`
		HighWaterStores int64     `json:"highWaterStores"`
	}
	if json.Unmarshal([]byte(body), &s) != nil || s.HighWater.IsZero() {
		return time.Time{}, 0, false
	}
	return s.HighWater, s.HighWaterStores, true
}

// leaseLost reports whether p's SQL lease is lost for good (status API).
func leaseLost(p *servertest.Proc) bool {
	code, body, err := p.Get(context.Background(), "/api/v1/snowflake/status")
	if err != nil || code != 200 {
		return false
	}
	var s struct {
		SourceState struct{ Lost bool } `json:"sourceState"`
	}
	return json.Unmarshal([]byte(body), &s) == nil && s.SourceState.Lost
}

// TestZooKeeperWorkerIDsExhausted: a namespace whose sequential counter is
// past 1023 (1,024 nodes created and deleted) has no worker ID left for a new
// ip:port: leaf-server must refuse to start, exit 1 and say why and what to
// do. An ip:port that already has a node reuses its worker ID and starts.
func TestZooKeeperWorkerIDsExhausted(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	conn := zktest.Conn(t, addr)
	parts := strings.Split("snowflake/"+name+"/forever", "/")
	for i := range parts {
		if _, err := conn.Create("/"+strings.Join(parts[:i+1], "/"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	// An existing server's node (worker ID 0), with a timestamp in the past.
	data := fmt.Sprintf(`{"ip":"127.0.0.1","port":"7201","timestamp":%d}`, time.Now().Add(-time.Hour).UnixMilli())
	if _, err := conn.Create("/snowflake/"+name+"/forever/127.0.0.1:7201-", []byte(data), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	var ops []any
	for range 1023 {
		ops = append(ops, &zk.CreateRequest{Path: "/snowflake/" + name + "/forever/10.0.0.1:1-", Flags: zk.FlagSequence, Acl: zk.WorldACL(zk.PermAll)})
	}
	if _, err := conn.Multi(ops...); err != nil {
		t.Fatalf("create 1023 sequential nodes: %v", err)
	}
	kids, _, err := conn.Children("/snowflake/" + name + "/forever")
	if err != nil {
		t.Fatal(err)
	}
	var dels []any
	for _, k := range kids {
		if strings.HasPrefix(k, "10.0.0.1:1-") {
			dels = append(dels, &zk.DeleteRequest{Path: "/snowflake/" + name + "/forever/" + k, Version: -1})
		}
	}
	if _, err := conn.Multi(dels...); err != nil {
		t.Fatalf("delete the dummy nodes: %v", err)
	}
	pushed := time.Since(t0)
	zkArgs := func(port string) []string {
		return []string{"--segment=false", "--worker-id-source", "zookeeper", "--zk", addr, "--leaf-name", name,
			"--advertise-ip", "127.0.0.1", "--snowflake-port", port}
	}

	// A new ip:port: refused.
	cmd := exec.Command(serverBin, append([]string{"--listen", "127.0.0.1:0"}, zkArgs("7202")...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cmd.Environ(), "TMPDIR="+t.TempDir())
	t1 := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(t1)
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Errorf("leaf-server in an exhausted namespace: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"no worker ID left", "1023", "leaf.name", "reuse an existing ip:port"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("refusal does not mention %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), "msg=listening"); n > 0 {
		t.Errorf("leaf-server listened before refusing:\n%s", out)
	}
	kept, _, _ := conn.Children("/snowflake/" + name + "/forever")
	report.add(t, row{
		Scenario: "4 snowflake worker IDs", Size: "ZooKeeper namespace counter past 1023 (1,024 nodes created and deleted), new ip:port",
		Errors: map[string]int{fmt.Sprintf("exit %d", code): 1}, Recovery: "n/a (refused at start)",
		Note: fmt.Sprintf("refused in %v (counter pushed in %v); message: %s; nodes left %d", took.Round(time.Millisecond), pushed.Round(time.Millisecond), errLine(string(out)), len(kept)),
	})

	// The existing ip:port: reuses worker ID 0 and serves.
	p := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: zkArgs("7201"), Env: []string{"TMPDIR=" + t.TempDir()}})
	p.WaitReady(t, time.Minute) // the node was written just now without a live node: held back a session timeout + margin
	tl := newTally(time.Second+slack, 10*time.Second)
	sfLoad([]*servertest.Proc{p}, []*tally{tl}, time.Second)
	checkWorker(t, tl, 0)
	if tl.idCount() == 0 {
		t.Error("the existing ip:port served no snowflake ID")
	}
	r := check(t, tl, nil, "")
	r.Scenario, r.Size, r.Recovery = "4 snowflake worker IDs", "ZooKeeper namespace counter past 1023, ip:port that already has a node, 1 s", "n/a"
	r.Note = "reuses its worker ID 0 and serves"
	report.add(t, r)
}

// errLine returns the first line of out that mentions the refusal,
// shortened for the table.
func errLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "no worker ID left") {
			l = strings.ReplaceAll(l, "|", "/")
			if len(l) > 400 {
				l = l[:400] + "…"
			}
			return "`" + l + "`"
		}
	}
	return "(none)"
}
