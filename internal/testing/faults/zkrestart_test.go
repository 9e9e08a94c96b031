package faults

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/internal/zktest"
)

// zkFleet is a set of snowflake servers taking worker IDs from one
// ZooKeeper address, each with its own data dir and <tmpdir> (Leaf's cache
// file) kept across restarts, registered as 127.0.0.1:<port>.
type zkFleet struct {
	t     *testing.T
	zk    string // the address the servers are given
	name  string // leaf.name
	port0 int    // server i registers port port0+i

	mu      sync.Mutex // guards servers
	servers map[int]*servertest.Proc
	tmp     map[int]string
	dirs    map[int]string
}

func newZKFleet(t *testing.T, zk, name string, port0 int) *zkFleet {
	return &zkFleet{t: t, zk: zk, name: name, port0: port0,
		servers: map[int]*servertest.Proc{}, tmp: map[int]string{}, dirs: map[int]string{}}
}

// start starts server i (again, on the same dirs after a kill), with extra
// flags.
func (f *zkFleet) start(i int, timeout time.Duration, extra ...string) *servertest.Proc {
	f.t.Helper()
	f.mu.Lock()
	if f.tmp[i] == "" {
		f.tmp[i], f.dirs[i] = f.t.TempDir(), f.t.TempDir()
	}
	tmp, dir := f.tmp[i], f.dirs[i]
	f.mu.Unlock()
	p := servertest.Start(f.t, serverBin, servertest.Options{
		Dir: dir,
		Args: append([]string{"--segment=false", "--worker-id-source", "zookeeper", "--zk", f.zk, "--leaf-name", f.name,
			"--advertise-ip", "127.0.0.1", "--snowflake-port", strconv.Itoa(f.port0 + i)}, extra...),
		Env:          []string{"TMPDIR=" + tmp},
		StartTimeout: timeout,
	})
	p.WaitReady(f.t, 90*time.Second) // a claim that may follow a live holder is held back a session timeout + margin
	f.mu.Lock()
	f.servers[i] = p
	f.mu.Unlock()
	return p
}

// set replaces server i and returns the previous one.
func (f *zkFleet) set(i int, p *servertest.Proc) *servertest.Proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.servers[i]
	f.servers[i] = p
	return old
}

func (f *zkFleet) get(i int) *servertest.Proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.servers[i]
}

// load sends batches of 1,000 snowflake IDs from one client per listed
// server into tallies[i] until stop is called. Transport errors are allowed
// while connOK says so, and for a request to a server replaced meanwhile
// (drive).
func (f *zkFleet) load(tallies map[int]*tally, connOK func() bool) (stop func()) {
	var targets []target
	for i, tl := range tallies {
		targets = append(targets, target{srv: func() *servertest.Proc { return f.get(i) }, path: "/api/v1/snowflake?count=1000",
			batch: true, tally: tl, connOK: connOK})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { drive(ctx, targets) })
	return func() { cancel(); wg.Wait() }
}

// zkBack waits until every listed server has a ZooKeeper session and a node
// upload that succeeded after since; it returns how long after since, or -1
// after limit.
func zkBack(t testing.TB, servers []*servertest.Proc, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for time.Since(since) < limit {
		ok := true
		for _, p := range servers {
			s := status(t, p).SourceState
			if s.State != "StateHasSession" || s.UploadError != "" || !uploadedAfter(s.LastUpload, since) {
				ok = false
			}
		}
		if ok {
			return time.Since(since)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1
}

var expiringRe = regexp.MustCompile(`Expiring session 0x[0-9a-f]+`)

// TestZooKeeperRestart runs two snowflake servers on a private ZooKeeper
// (internal/zktest.Server: Debian's jars, a temporary data dir) reached
// through a fault proxy, and breaks ZooKeeper itself:
//
//   - killed with -9 and restarted on its data dir after 2 s: sessions and
//     nodes survive, the servers reconnect and upload again;
//   - the session expired by ZooKeeper for real: the proxy blackholes the
//     connection past the 6 s session timeout, until the ZooKeeper server's
//     log says "Expiring session" for both, then heals: the servers stopped issuing
//     4 s after their last word from ZooKeeper (the session is the lease),
//     lost the lease with the session, claimed again and upload again;
//   - killed and restarted with an empty data dir (a new ensemble): nodes,
//     sessions and the sequence counter are gone. Server B is killed and
//     restarted first, then a new server C starts. No two live servers may
//     share a worker ID and no ID may repeat. A, still running, stops (no
//     word from ZooKeeper on its session), claims again without a restart,
//     and serves again.
//
// The only errors allowed are the lease's refusals (503 -1) while a server
// has not heard from ZooKeeper or claims again.
func TestZooKeeperRestart(t *testing.T) {
	t.Parallel()
	zs := zktest.StartServer(t)
	px := faultproxy.Start(t, zs.Addr())
	f := newZKFleet(t, px.Addr(), "leafgo-zkrestart", 7301)
	a, b := f.start(0, 0), f.start(1, 0)
	workers := map[int]int64{0: status(t, a).WorkerID, 1: status(t, b).WorkerID}
	if workers[0] == workers[1] {
		t.Fatalf("both servers have worker ID %d", workers[0])
	}
	cmd := "go test -race -count=1 -run '^TestZooKeeperRestart$' ./faults/"
	var every []*tally
	newTallies := func(n int) map[int]*tally {
		m := map[int]*tally{}
		for i := range n {
			m[i] = newTally(time.Second+slack, 10*time.Second)
			every = append(every, m[i])
		}
		return m
	}
	phaseRow := func(size string, ts map[int]*tally, rec, note string) {
		var all []*tally
		for i, tl := range ts {
			checkWorker(t, tl, workers[i])
			all = append(all, tl)
		}
		r := check(t, mergeTallies(all...), nil, "")
		for k := range r.Errors {
			if k != "503 -1" {
				t.Errorf("%s: errors %v, want none but the lease's refusals (503 -1)", size, r.Errors)
				break
			}
		}
		r.Scenario, r.Size, r.Recovery, r.Cmd, r.Note = "4 snowflake worker IDs", size, rec, cmd, note
		report.add(t, r)
	}
	both := func() []*servertest.Proc { return []*servertest.Proc{f.get(0), f.get(1)} }

	// 1. kill -9 and restart on the same data dir.
	ts := newTallies(2)
	stop := f.load(ts, nil)
	time.Sleep(time.Second)
	zs.Kill()
	time.Sleep(2 * time.Second)
	downState := status(t, a).SourceState.State
	zs.Restart(t)
	restarted := time.Now()
	rec := zkBack(t, both(), restarted, 30*time.Second)
	if rec < 0 {
		t.Errorf("ZooKeeper restarted: sessions and uploads not back within 30 s: %+v / %+v", status(t, a).SourceState, status(t, b).SourceState)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	phaseRow("private ZooKeeper kill -9, down 2 s, restarted on its data dir, 2 servers", ts, fmtRecovery(rec),
		fmt.Sprintf("recovery = session and node upload back after the restart; state while down: %s; worker IDs %d and %d kept", downState, workers[0], workers[1]))

	// 2. session expired by ZooKeeper: blackhole past the session timeout.
	expiredBefore := len(expiringRe.FindAllString(zs.Log(), -1))
	ts = newTallies(2)
	stop = f.load(ts, nil)
	time.Sleep(500 * time.Millisecond)
	px.Blackhole(t)
	// Until ZooKeeper has expired both sessions (its log says so), not for a
	// fixed time past the session timeout.
	waittest.For(t, 30*time.Second, "ZooKeeper expiring both servers' sessions", func() bool {
		return len(expiringRe.FindAllString(zs.Log(), -1))-expiredBefore >= 2
	})
	holeState := status(t, a).SourceState.State
	px.Clear(t)
	cleared := time.Now()
	rec = zkBack(t, both(), cleared, 30*time.Second)
	if rec < 0 {
		t.Errorf("session expiry: sessions and uploads not back within 30 s: %+v / %+v", status(t, a).SourceState, status(t, b).SourceState)
	}
	stop()
	expired := len(expiringRe.FindAllString(zs.Log(), -1)) - expiredBefore
	phaseRow("private ZooKeeper session expired (connection blackholed until ZooKeeper expired both sessions, session timeout 6 s), 2 servers", ts, fmtRecovery(rec),
		fmt.Sprintf("ZooKeeper logged %d \"Expiring session\"; state while blackholed: %s; recovery = new session and node upload", expired, holeState))

	// 3. a new ensemble: killed, data dir wiped, restarted.
	ts = newTallies(3)     // C (2) is nil until it starts: its client waits
	stop = f.load(ts, nil) // requests cut by B's kill are allowed: B is replaced (drive)
	time.Sleep(500 * time.Millisecond)
	ts[0].startFault()
	zs.Kill()
	zs.Wipe(t)
	zs.Restart(t)
	wiped := time.Now()
	time.Sleep(time.Second)
	// B restarts first (kill -9), while A keeps running on its old claim.
	f.set(1, nil).Kill9() // B's client waits for the new process
	b = f.start(1, 0)
	wb := status(t, b).WorkerID
	if wb == workers[0] {
		t.Errorf("after the new ensemble, restarted server B took worker ID %d, which live server A holds", wb)
	}
	// Then a server that never ran before.
	c := f.start(2, 0)
	wc := status(t, c).WorkerID
	if wc == workers[0] || wc == wb {
		t.Errorf("after the new ensemble, new server C took worker ID %d; live A holds %d, B %d", wc, workers[0], wb)
	}
	// B and C upload to the new ensemble. A gets a session on it, finds its
	// node gone (a conflict: another server may have drawn its number) and
	// stops issuing for good, /readyz 503.
	rec = zkBack(t, []*servertest.Proc{b, c}, wiped, 40*time.Second)
	if rec < 0 {
		t.Errorf("new ensemble: sessions and uploads not back within 40 s: B %+v, C %+v",
			status(t, b).SourceState, status(t, c).SourceState)
	}
	// A stopped (its first refusal, measured by its load: the restarts of B and C above take
	// a while), claims again without a restart and serves.
	aStopped := ts[0].firstErrAt()
	if aStopped.IsZero() {
		t.Errorf("new ensemble: A never refused (no word from ZooKeeper on its session must stop it)")
	}
	aBack := waitServing(t, a, 120*time.Second)
	time.Sleep(500 * time.Millisecond)
	stop()
	wa := status(t, a).WorkerID
	if wa == wb || wa == wc {
		t.Errorf("after the new ensemble: A %d, B %d, C %d: two live servers share a worker ID", wa, wb, wc)
	}
	nodes := zkNodes(t, zs.Addr(), f.name)
	byWorker := map[int64][]string{}
	for _, n := range nodes {
		if i := strings.LastIndexByte(n, '-'); i > 0 {
			w, _ := strconv.ParseInt(n[i+1:], 10, 64)
			byWorker[w] = append(byWorker[w], n)
		}
	}
	for w, ns := range byWorker {
		if len(ns) > 1 {
			t.Errorf("worker ID %d registered by %d nodes after the new ensemble: %v", w, len(ns), ns)
		}
	}
	if wb == workers[1] {
		checkWorker(t, ts[1], wb)
	}
	checkWorker(t, ts[2], wc)
	r := check(t, mergeTallies(ts[0], ts[1], ts[2]), nil, "")
	for k := range mergeTallies(ts[1], ts[2]).errs {
		if k != "conn" && k != "503 -1" {
			t.Errorf("new ensemble: B's and C's errors %v, want none but requests cut by B's kill and the lease's refusals", r.Errors)
			break
		}
	}
	r.Scenario, r.Cmd = "4 snowflake worker IDs", cmd
	r.Size = "private ZooKeeper killed, data dir wiped, restarted (new ensemble); then B kill -9 and restarted, new server C started"
	r.Recovery = fmtRecovery(rec)
	r.Note = fmt.Sprintf("worker IDs: A %d → %d (kept running; first refusal %v after ZooKeeper came back empty, claimed again without a restart, serving by %v after), B %d → %d after its restart, C %d; nodes afterwards %v; recovery = B and C with a session and a node upload after the wipe; conn = requests cut by B's kill, 503 -1 = the lease's refusals",
		workers[0], wa, aStopped.Sub(wiped).Round(100*time.Millisecond), aBack.Sub(wiped).Round(100*time.Millisecond), workers[1], wb, wc, nodes)
	report.add(t, r)

	ids, _, _, _ := mergeTallies(every...).snapshot()
	if dups, first := duplicates(ids); dups > 0 {
		t.Errorf("%d snowflake IDs repeated across phases, e.g. %v", dups, first)
	}
}

// zkNodes lists the worker nodes of a namespace (for failure messages).
func zkNodes(t testing.TB, addr, name string) []string {
	conn := zktest.Conn(t, addr)
	kids, _, err := conn.Children("/snowflake/" + name + "/forever")
	if err != nil {
		return []string{err.Error()}
	}
	return kids
}

// TestZooKeeperDownAtStart: a server claims its worker ID on a private
// ZooKeeper and is killed with -9; then ZooKeeper itself is killed (the
// process is not running: connections are refused). Started again with
// --zk-cache-start (Leaf's cache-file start, opt-in), the server waits the
// 10 s connect timeout and starts from Leaf's cache file with its worker ID
// and serves, above the IDs of its first run. A server that never ran (no
// cache file) with --zk-cache-start must refuse to start: exit 1 with a
// message saying that ZooKeeper is unreachable and no cached worker ID
// exists. (Without the flag a server fails closed:
// TestZooKeeperCacheStartLease.)
func TestZooKeeperDownAtStart(t *testing.T) {
	t.Parallel()
	zs := zktest.StartServer(t)
	f := newZKFleet(t, zs.Addr(), "leafgo-zkdownstart", 7401)
	a := f.start(0, 0)
	wa := status(t, a).WorkerID
	first := map[int]*tally{0: newTally(time.Second+slack, 10*time.Second)}
	stop := f.load(first, nil)
	time.Sleep(time.Second)
	stop()
	a.Kill9()
	zs.Kill()

	// Both at once: the one without a cache file exits, the other starts.
	var wg sync.WaitGroup
	var (
		out  []byte
		code int
		took time.Duration
	)
	wg.Go(func() {
		cmd := exec.Command(serverBin, "--listen", "127.0.0.1:0", "--segment=false", "--worker-id-source", "zookeeper",
			"--zk", zs.Addr(), "--leaf-name", f.name, "--advertise-ip", "127.0.0.1", "--snowflake-port", "7499", "--zk-cache-start")
		cmd.Dir = t.TempDir()
		cmd.Env = append(cmd.Environ(), "TMPDIR="+t.TempDir())
		t0 := time.Now()
		var err error
		out, err = cmd.CombinedOutput()
		took = time.Since(t0)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
			out = append(out, err.Error()...)
		}
	})
	t0 := time.Now()
	a = f.start(0, 40*time.Second, "--zk-cache-start")
	startTook := time.Since(t0)
	wg.Wait()
	st := status(t, a)
	if st.WorkerID != wa || st.SourceState.Source != "cache" {
		t.Errorf("restart with ZooKeeper not running: worker %d from %q, want %d from the cache file", st.WorkerID, st.SourceState.Source, wa)
	}
	second := map[int]*tally{0: newTally(time.Second+slack, 10*time.Second)}
	stop = f.load(second, nil)
	time.Sleep(time.Second)
	stop()
	checkWorker(t, second[0], wa)
	firstIDs, _, _, _ := first[0].snapshot()
	secondIDs, _, _, _ := second[0].snapshot()
	if len(firstIDs) > 0 && len(secondIDs) > 0 && slices.Min(secondIDs) <= slices.Max(firstIDs) {
		t.Errorf("after the restart from the cache file, ID %d is not above the first run's highest %d", slices.Min(secondIDs), slices.Max(firstIDs))
	}
	r := check(t, mergeTallies(first[0], second[0]), nil, "")
	if len(r.Errors) > 0 {
		t.Errorf("errors %v, want none", r.Errors)
	}
	r.Scenario, r.Size, r.Recovery = "4 snowflake worker IDs", "private ZooKeeper not running at start, server with Leaf's cache file (kill -9 before)", "n/a"
	r.Note = fmt.Sprintf("started from the cache file in %v (10 s connect timeout first), worker ID %d as before, every ID above the first run's", startTook.Round(100*time.Millisecond), st.WorkerID)
	report.add(t, r)

	if code != 1 {
		t.Errorf("server without a cache file, ZooKeeper not running: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"ZooKeeper unreachable and no cached worker ID", "workerID.properties"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("refusal does not mention %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "msg=listening") {
		t.Errorf("server without a cache file listened:\n%s", out)
	}
	msg := "(none)"
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "no cached worker ID") {
			msg = "`" + strings.ReplaceAll(tail(l, 300), "|", "/") + "`"
		}
	}
	report.add(t, row{
		Scenario: "4 snowflake worker IDs", Size: "private ZooKeeper not running at start, new server without a cache file",
		Errors: map[string]int{fmt.Sprintf("exit %d", code): 1}, Recovery: "n/a (refused at start)",
		Note: fmt.Sprintf("refused after %v; message: %s", took.Round(100*time.Millisecond), msg),
	})
}

// tail returns the last n bytes of s, marked with … when cut.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
