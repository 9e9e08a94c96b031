package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/etcdtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/snowflake"
)

// etcdTTL is leaf-server's etcd lease TTL (etcdworker.DefaultTTL); etcdKeepAlive its keepalive
// interval.
const (
	etcdTTL       = 10 * time.Second
	etcdKeepAlive = 3 * time.Second
)

// etcdLost returns the loss reason on the status page of p ("" while the claim holds).
func etcdLost(p *servertest.Proc) string {
	code, body, err := p.Get(context.Background(), "/api/v1/snowflake/status")
	if err != nil || code != 200 {
		return ""
	}
	var s struct {
		SourceState struct{ Lost string } `json:"sourceState"`
	}
	_ = json.Unmarshal([]byte(body), &s)
	return s.SourceState.Lost
}

// issuedAfter counts the snowflake IDs of tl whose timestamp is later than at (ms), with one
// of them.
func issuedAfter(tl *tally, at time.Time) (n int, example int64) {
	ids, _, _, _ := tl.snapshot()
	for _, id := range ids {
		if snowflake.Decompose(id).Millis > at.UnixMilli() {
			n, example = n+1, id
		}
	}
	return n, example
}

var claimedRe = regexp.MustCompile(`time=(\S+) level=INFO msg="claimed snowflake worker ID in etcd"`)

// claimedAt is when p's log says it claimed its worker ID.
func claimedAt(t *testing.T, p *servertest.Proc) time.Time {
	t.Helper()
	m := claimedRe.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatalf("no claim line in the log:\n%s", p.Logs())
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestEtcdWorkerIDs: real leaf-server processes take worker IDs from a private 3-member etcd
// cluster, under load on the Leaf snowflake route, every ID collected:
//   - three servers get three IDs inside --worker-id-min 10 / --worker-id-max 12;
//   - kill -9 one (A): a new server (D) gets A's ID, and only after A's lease ran out;
//   - SIGSTOP a holder (B) past its TTL while a new server (E) takes its ID, then SIGCONT: B
//     answers no snowflake ID, /readyz 503, its status says the ID is lost;
//   - stop the etcd leader, then a second member (quorum lost): every holder stops issuing
//     before its lease's TTL has passed (so before etcd could grant its ID to anyone), /readyz
//     503; all recover on the same lease when the members are back;
//   - SIGTERM (C) frees the ID at once: the claim key is gone when C has exited, and a new
//     server (F) takes C's ID without waiting for a lease.
//
// No ID repeats across the six servers.
func TestEtcdWorkerIDs(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	cli := cl.Client(t)
	const prefix = "/leaf-faults"
	args := []string{"--segment=false", "--worker-id-source", "etcd", "--etcd-endpoints", strings.Join(cl.Endpoints(), ","),
		"--etcd-prefix", prefix, "--worker-id-min", "10", "--worker-id-max", "12"}
	startE := func() *servertest.Proc {
		return servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args, StartTimeout: 60 * time.Second})
	}
	cmd := "go test -race -count=1 -run '^TestEtcdWorkerIDs$' ./faults/"
	newT := func() *tally { return newTally(time.Second+slack, 10*time.Second) }
	var all []*tally
	load := func(p *servertest.Proc) (*tally, func()) {
		tl := newT()
		all = append(all, tl)
		return tl, sfSingles(func() *servertest.Proc { return p }, tl, 2, nil)
	}

	// Three servers, three IDs in [10, 12].
	a, b, c, wa, wb, wc := startThree(t, startE)
	ta, stopA := load(a)
	tb, stopB := load(b)
	tc, stopC := load(c)

	// A fourth server finds the range full: it waits TTL + 2 s, then exits 1 naming the holders.
	code, out, took := runExit(t, args...)
	if code != 1 || !strings.Contains(out, "no free worker ID") || !strings.Contains(out, "10 held by") {
		t.Errorf("fourth server with [10, 12] held: exit %d, want 1 with \"no free worker ID\" and the holders:\n%s", code, out)
	}
	report.add(t, row{
		Scenario: "4 snowflake worker IDs", Size: "etcd, 3 servers hold [10, 12], a fourth starts",
		Errors: map[string]int{fmt.Sprintf("exit %d", code): 1}, Recovery: "n/a (refused at start)", Cmd: cmd,
		Note: fmt.Sprintf("waited and exited after %v (bound TTL + 2 s = 12 s); message: %s", took.Round(time.Millisecond), exitLine(out)),
	})

	// kill -9 A; D waits for A's lease.
	stopA()
	a.Kill9()
	killed := time.Now()
	d := startE()
	wd := status(t, d).WorkerID
	dClaim := claimedAt(t, d).Sub(killed)
	if wd != wa {
		t.Errorf("D got worker %d, want the killed A's %d", wd, wa)
	}
	// A's last keepalive was at most etcdKeepAlive before the kill.
	if dClaim < etcdTTL-etcdKeepAlive {
		t.Errorf("D claimed worker %d %v after A was killed: before A's lease (TTL %v) could have run out", wd, dClaim, etcdTTL)
	}
	td, stopD := load(d)
	r := check(t, mergeTallies(ta, tb, tc, td), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, fmtRecovery(dClaim)
	r.Size = "etcd (3 members), 3 servers in [10, 12]; A killed -9, D started at once"
	r.Note = fmt.Sprintf("A %d, B %d, C %d; D waited for A's lease and took worker %d %v after the kill (TTL 10 s)",
		wa, wb, wc, wd, dClaim.Round(time.Millisecond))
	report.add(t, r)

	// SIGSTOP B past its TTL; E takes B's ID; SIGCONT B.
	stopB()
	if err := b.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	e := startE()
	we := status(t, e).WorkerID
	eClaim := claimedAt(t, e).Sub(paused)
	if we != wb {
		t.Errorf("E got worker %d, want the paused B's %d", we, wb)
	}
	te, stopE := load(e)
	time.Sleep(time.Until(paused.Add(etcdTTL + 2*time.Second)))
	if err := b.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	tbAfter, stopBAfter := load(b)
	// Not a fixed time: wait until B has noticed the loss (status), then for
	// 100 refusals after it (each a request it would have answered).
	waittest.For(t, 30*time.Second, "B noticing its lost lease", func() bool { return etcdLost(b) != "" })
	refused := tbAfter.errCount()
	waittest.For(t, 30*time.Second, "B refusing 100 requests after the loss", func() bool { return tbAfter.errCount() >= refused+100 })
	stopBAfter()
	readyB := readyz(b)
	lostB := etcdLost(b)
	if n := tbAfter.idCount(); n > 0 {
		t.Errorf("B answered %d snowflake IDs after SIGCONT, with its worker ID %d held by E", n, wb)
	}
	if readyB != 503 || lostB == "" {
		t.Errorf("B after SIGCONT: /readyz %d, status lost %q; want 503 and a reason", readyB, lostB)
	}
	r = check(t, mergeTallies(tbAfter, te), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, "B: lost; claims again by itself (here the range stays full)"
	r.Size = "etcd, holder B SIGSTOPped 12 s (TTL 10 s), E started meanwhile, then SIGCONT"
	r.Note = fmt.Sprintf("E took B's worker %d %v after the pause; B after SIGCONT: %d IDs, /readyz %d, lost: %s",
		we, eClaim.Round(time.Millisecond), tbAfter.idCount(), readyB, lostB)
	report.add(t, r)
	// B keeps trying to claim again (the range is full); stop it, or it would take the ID
	// that C's SIGTERM frees below before F does.
	b.Kill9()

	// Quorum lost: stop the leader, then a second member.
	stopC()
	stopD()
	stopE()
	holders := []*servertest.Proc{c, d, e}
	qt := make([]*tally, len(holders))
	var stops []func()
	for i, p := range holders {
		var stop func()
		qt[i], stop = load(p)
		stops = append(stops, stop)
	}
	time.Sleep(time.Second)
	lead := cl.Leader(t)
	cl.Member(lead).Stop()
	// The holders renew through the new leader before the second stop: two
	// more keepalives of each (the second began after the stop), not a
	// fixed time.
	for _, p := range holders {
		waitNextReports(t, p, "keepAlives", 30*time.Second)
	}
	second := cl.Leader(t)
	for _, tl := range qt {
		tl.startFault()
	}
	cl.Member(second).Stop()
	var fails []string
	var idsAtFail, errsAtFail []int
	for i, tl := range qt {
		f := tl.waitFirstErr(t, 2*etcdTTL)
		idsAtFail, errsAtFail = append(idsAtFail, tl.idCount()), append(errsAtFail, tl.errCount())
		if f >= etcdTTL {
			t.Errorf("holder %d stopped issuing %v after quorum was lost, not before the lease TTL %v", i, f, etcdTTL)
		}
		fails = append(fails, f.Round(time.Millisecond).String())
	}
	// Not a fixed time: each holder refuses 100 more requests (each one it
	// would have answered) before the checks.
	for i, tl := range qt {
		waittest.For(t, 30*time.Second, fmt.Sprintf("holder %d refusing 100 more requests without quorum", i), func() bool {
			return tl.errCount() >= errsAtFail[i]+100
		})
	}
	var readys []int
	for i, p := range holders {
		readys = append(readys, readyz(p))
		if readys[i] != 503 {
			t.Errorf("holder %d: /readyz %d without quorum, want 503", i, readys[i])
		}
		// Once refusing, a holder issues nothing more: no ID carries a time after the first
		// refusal reached the client. (Counting the IDs received after it would also count
		// an ID issued before the refusal whose answer arrived later.)
		if n, ex := issuedAfter(qt[i], qt[i].firstErrAt()); n > 0 {
			t.Errorf("holder %d issued %d IDs after its first refusal without quorum (had %d when it refused), e.g. %d at %s",
				i, n, idsAtFail[i], ex, snowflake.Decompose(ex).Time().Format(time.RFC3339Nano))
		}
	}
	cl.Member(lead).Restart(t)
	cl.Member(second).Restart(t)
	for _, tl := range qt {
		tl.endFault()
	}
	var recs []string
	for _, tl := range qt {
		recs = append(recs, tl.waitRecovered(t, time.Second, 40*time.Second).Round(time.Millisecond).String())
	}
	for i, p := range holders {
		if code := readyz(p); code != 200 {
			t.Errorf("holder %d: /readyz %d with quorum back, want 200", i, code)
		}
	}
	for _, s := range stops {
		s()
	}
	r = check(t, mergeTallies(qt...), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, strings.Join(recs, " / ")
	r.Size = "etcd, leader stopped, then a second member (quorum lost), 3 holders under load"
	r.Note = fmt.Sprintf("first refusal after the quorum loss: %s (TTL 10 s); /readyz without quorum %v; same leases after recovery",
		strings.Join(fails, " / "), readys)
	report.add(t, r)

	// SIGTERM C: its key is gone at once, F takes C's ID without a lease wait.
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("C did not exit on SIGTERM")
	}
	exited := time.Now()
	resp, err := cli.Get(context.Background(), prefix+"/workers/"+strconv.FormatInt(wc, 10))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("C's claim key still there after C exited on SIGTERM: %s", resp.Kvs[0].Value)
	}
	f := startE()
	wf := status(t, f).WorkerID
	fClaim := claimedAt(t, f).Sub(exited)
	fListen := time.Since(exited)
	if wf != wc {
		t.Errorf("F got worker %d, want the stopped C's %d", wf, wc)
	}
	if fClaim >= etcdTTL-etcdKeepAlive {
		t.Errorf("F claimed C's ID %v after C exited: not at once", fClaim)
	}
	tf, stopF := load(f)
	time.Sleep(2 * time.Second)
	stopF()
	checkWorker(t, tf, wc)
	r = check(t, tf, nil, "")
	r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, "n/a"
	r.Size = "etcd, holder C stopped with SIGTERM, F started after"
	r.Note = fmt.Sprintf("C's key gone when C had exited; F claimed worker %d %v after (its start includes the peer clock check, which waits for the live holders' next reports, up to 4 s), listening %v after (then waited for the high-water mark C left, at most 3 s ahead)",
		wf, fClaim.Round(time.Millisecond), fListen.Round(time.Millisecond))
	report.add(t, r)

	for tl, w := range map[*tally]int64{ta: wa, tb: wb, tc: wc, td: wd, te: we, qt[0]: wc, qt[1]: wd, qt[2]: we} {
		checkWorker(t, tl, w)
	}
	ids, _, _, _ := mergeTallies(all...).snapshot()
	if dups, ex := duplicates(ids); dups > 0 {
		t.Errorf("%d of %d IDs repeated across the six servers, e.g. %v", dups, len(ids), ex)
	}
	t.Logf("%d IDs from six servers, no repeat", len(ids))
}

// runExit runs leaf-server with args until it exits (at most 60 s) and returns its exit code,
// its output and how long it ran.
func runExit(t *testing.T, args ...string) (int, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = t.TempDir()
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(t0)
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "msg=listening") {
		t.Errorf("leaf-server listened before it exited:\n%s", out)
	}
	return code, string(out), took
}

// TestEtcdPeerClock (issue 15 item 5): a holder whose clock (a -tags leaftest build, clock
// shifted by a file) reads 30 s ahead makes a new server refuse to start (exit 1) naming the
// holder's key; with the holder 2 s ahead the new server starts.
func TestEtcdPeerClock(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	args := []string{"--segment=false", "--worker-id-source", "etcd", "--etcd-endpoints", strings.Join(cl.Endpoints(), ","),
		"--etcd-prefix", "/leaf-peerclock"}
	clk := newStepClock(t)
	clk.set(t, 30*time.Second)
	p := startClocked(t, t.TempDir(), clk, args...)
	wp := status(t, p).WorkerID
	code, out, took := runExit(t, args...)
	name := "/leaf-peerclock/workers/" + strconv.FormatInt(wp, 10)
	if code != 1 || !strings.Contains(out, "off the live peers' clocks") || !strings.Contains(out, name) {
		t.Errorf("new server with a peer 30 s ahead: exit %d, want 1 naming %s:\n%s", code, name, out)
	}
	report.add(t, row{
		Scenario: "4 snowflake worker IDs", Size: "etcd, a live holder's clock 30 s ahead, a new server starts (--max-peer-clock-skew 10s)",
		Errors: map[string]int{fmt.Sprintf("exit %d", code): 1}, Recovery: "n/a (refused at start)",
		Note: fmt.Sprintf("refused after %v; message: %s", took.Round(time.Millisecond), exitLine(out)),
	})
	clk.set(t, 2*time.Second)
	waitNextReports(t, p, "keepAlives", 30*time.Second) // a report with the new offset
	q := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args, StartTimeout: 60 * time.Second})
	if wq := status(t, q).WorkerID; wq == wp {
		t.Errorf("both servers hold worker %d", wq)
	}
	if !strings.Contains(q.Logs(), "peer clock check passed") {
		t.Errorf("no peer clock check in the log of the server started next to a peer 2 s ahead:\n%s", q.Logs())
	}
	report.add(t, row{
		Scenario: "4 snowflake worker IDs", Size: "etcd, a live holder's clock 2 s ahead, a new server starts",
		Recovery: "n/a", Note: "starts (peer clock check passed)",
	})
}

// exitLine returns leaf-server's closing "leaf-server: …" line of out, shortened for the table.
func exitLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "leaf-server: ") {
			l = strings.ReplaceAll(l, "|", "/")
			if len(l) > 500 {
				l = l[:500] + "…"
			}
			return "`" + l + "`"
		}
	}
	return "(none)"
}
