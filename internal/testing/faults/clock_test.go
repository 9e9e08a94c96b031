package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/snowflake"
)

// clockBinDirs hold extra builds (leaftest, leafctl); removed by TestMain.
var clockBinDirs []string

// clockBin builds leaf-server with -tags leaftest once: its snowflake clock
// is the system clock plus the offset in LEAF_TEST_CLOCK_FILE
// (cmd/leaf-server/testclock_leaftest.go). Production builds have no hook.
var clockBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "leaf-server-leaftest-")
	if err != nil {
		return "", err
	}
	clockBinDirs = append(clockBinDirs, dir)
	return servertest.BuildTags(dir, servertest.Race, "leaftest")
})

// stepClock is the file a leaftest server reads its clock offset from.
type stepClock struct{ path string }

func newStepClock(t testing.TB) *stepClock {
	c := &stepClock{path: filepath.Join(t.TempDir(), "clock-offset")}
	c.set(t, 0)
	return c
}

// set writes the offset atomically (write then rename).
func (c *stepClock) set(t testing.TB, off time.Duration) {
	t.Helper()
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(off.Milliseconds(), 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		t.Fatal(err)
	}
}

func startClocked(t testing.TB, dir string, c *stepClock, args ...string) *servertest.Proc {
	t.Helper()
	servertest.SkipShort(t) // before the leaftest build
	bin, err := clockBin()
	if err != nil {
		t.Fatalf("build leaf-server -tags leaftest: %v", err)
	}
	return servertest.Start(t, bin, servertest.Options{Dir: dir, Args: args, Env: []string{"LEAF_TEST_CLOCK_FILE=" + c.path}})
}

// sfSingles runs n clients on the Leaf snowflake route of *p until the
// returned stop is called.
func sfSingles(p func() *servertest.Proc, tl *tally, n int, connOK func() bool) (stop func()) {
	var targets []target
	for range n {
		targets = append(targets, target{srv: p, path: "/api/snowflake/get/clock", tally: tl, connOK: connOK})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { drive(ctx, targets) })
	return func() { cancel(); wg.Wait() }
}

// TestSnowflakeClockSteps steps the snowflake clock of a real server (a
// -tags leaftest build) back: by 3 ms (waited out: no error, or Leaf's -1),
// by 2 s (-3 at once, serving again as soon as the clock is back), and behind
// the persisted high-water mark across a restart, for the static source (a
// file in the data dir) and the SQL lease source (the lease row): the
// restarted server issues nothing until its clock passes the mark, and never
// an ID at or below one of the first run.
func TestSnowflakeClockSteps(t *testing.T) {
	t.Parallel()
	t.Run("steps", func(t *testing.T) {
		t.Parallel()
		clk := newStepClock(t)
		p := startClocked(t, t.TempDir(), clk, "--segment=false", "--worker-id", "3")
		srv := func() *servertest.Proc { return p }
		cmd := "go test -race -count=1 -run '^TestSnowflakeClockSteps$/^steps$' ./faults/"

		// 3 ms back: waited out inside the call.
		small := newTally(time.Second+slack, 10*time.Second)
		stop := sfSingles(srv, small, 4, nil)
		time.Sleep(500 * time.Millisecond)
		before := small.idCount()
		clk.set(t, -3*time.Millisecond)
		time.Sleep(time.Second) // a second of load after the step
		for deadline := time.Now().Add(30 * time.Second); small.idCount() <= before && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond) // the check below reports a miss
		}
		stop()
		r := check(t, small, nil, "")
		for k := range r.Errors {
			if k != "500 -1" {
				t.Errorf("clock 3 ms back: error %q, want none or Leaf's -1", k)
			}
		}
		if small.idCount() <= before {
			t.Errorf("clock 3 ms back: no ID served after the step")
		}
		r.Scenario, r.Size, r.Recovery, r.Cmd = "6 snowflake clock steps", "static source, clock 3 ms back mid-run, 4 clients", "n/a (waited out)", cmd
		r.Note = fmt.Sprintf("%d IDs before the step, %d after; max backward wait %v", before, r.IDs-before, snowflake.DefaultMaxBackwardWait)
		report.add(t, r)

		// 2 s back: refused at once, serving again when the clock is back.
		big := newTally(time.Second, 10*time.Second)
		stop = sfSingles(srv, big, 4, nil)
		time.Sleep(500 * time.Millisecond)
		big.startFault()
		clk.set(t, -3*time.Millisecond-2*time.Second)
		first := big.waitFirstErr(t, 5*time.Second)
		time.Sleep(time.Second)
		clk.set(t, 0)
		big.endFault()
		rec := big.waitRecovered(t, 500*time.Millisecond, 10*time.Second)
		stop()
		r = check(t, big, nil, "")
		if r.Errors["500 -3"] == 0 {
			t.Errorf("clock 2 s back: no -3 answer")
		}
		r.Scenario, r.Size, r.Recovery, r.Cmd = "6 snowflake clock steps", "static source, clock 2 s back for 1 s, 4 clients", fmtRecovery(rec), cmd
		r.Note = fmt.Sprintf("first -3 %v after the step; error bound 1 s", first.Round(time.Millisecond))
		report.add(t, r)
		checkWorker(t, mergeTallies(small, big), 3)
		ids, _, _, _ := mergeTallies(small, big).snapshot()
		if dups, ex := duplicates(ids); dups > 0 {
			t.Errorf("%d IDs repeated across the steps, e.g. %v", dups, ex)
		}
	})
	t.Run("restart-static", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		clockRestart(t, "static", dir, syscall.SIGKILL, "--segment=false", "--worker-id", "4")
	})
	t.Run("restart-sql", func(t *testing.T) {
		t.Parallel()
		d := newDB(t, "postgres")
		clockRestart(t, "sql", t.TempDir(), syscall.SIGTERM, "--segment=false", "--worker-id-source", "sql", "--segment-dsn", d.direct)
	})
}

// clockRestart: serve, stop the server with sig, step its clock back by
// 3.5 s (behind the high-water mark, which runs up to 3 s ahead), restart on
// the same data dir: -3 until the clock passes the mark, then IDs above
// every ID of the first run.
func clockRestart(t *testing.T, source, dir string, sig syscall.Signal, args ...string) {
	const back = 3500 * time.Millisecond
	clk := newStepClock(t)
	p := startClocked(t, dir, clk, args...)
	// A lease on a fresh table has no history: the claim is held back TTL +
	// margin before it serves (docs/contract.md §3.6).
	p.WaitReady(t, 30*time.Second)
	worker := status(t, p).WorkerID
	tl1 := newTally(time.Second+slack, 10*time.Second)
	var stopping bool
	var mu sync.Mutex
	connOK := func() bool { mu.Lock(); defer mu.Unlock(); return stopping }
	stop := sfSingles(func() *servertest.Proc { return p }, tl1, 4, connOK)
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	stopping = true
	mu.Unlock()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	stop()
	ids1, _, _, _ := tl1.snapshot()
	if len(ids1) == 0 {
		t.Fatal("first run served no ID")
	}
	maxFirst := ids1[0]
	for _, id := range ids1 {
		maxFirst = max(maxFirst, id)
	}

	clk.set(t, -back)
	t0 := time.Now()
	p2 := startClocked(t, dir, clk, args...)
	if w := status(t, p2).WorkerID; w != worker {
		t.Fatalf("restart got worker ID %d, want %d again", w, worker)
	}
	tl2 := newTally(time.Second+slack, 10*time.Second)
	tl2.startFault()
	stop = sfSingles(func() *servertest.Proc { return p2 }, tl2, 4, nil)
	// The fault ends by itself when the offset clock passes the mark; the
	// recovery is measured from the restart.
	tl2.endFault()
	deadline := time.Now().Add(15 * time.Second)
	for tl2.idCount() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	waited := time.Since(t0)
	time.Sleep(500 * time.Millisecond)
	stop()
	ids2, errs2, _, _ := tl2.snapshot()
	if len(ids2) == 0 {
		t.Fatalf("restarted server with the clock %v back served nothing within 15 s; errors %v", back, errs2)
	}
	if errs2["500 -3"] == 0 {
		t.Errorf("restarted server behind the mark: no -3 answer before the first ID (errors %v)", errs2)
	}
	for k := range errs2 {
		if k != "500 -3" {
			t.Errorf("restart: error %q, want only -3", k)
		}
	}
	below := 0
	for _, id := range ids2 {
		if id <= maxFirst {
			below++
		}
	}
	if below > 0 {
		t.Errorf("%d IDs of the restarted server are at or below the first run's largest %d", below, maxFirst)
	}
	all := mergeTallies(tl1, tl2)
	checkWorker(t, all, worker)
	r := check(t, all, nil, "")
	r.Scenario = "6 snowflake clock steps"
	how := map[syscall.Signal]string{syscall.SIGKILL: "kill -9", syscall.SIGTERM: "SIGTERM"}[sig]
	r.Size = fmt.Sprintf("%s source, %s, restart with the clock %v back (behind the persisted mark)", source, how, back)
	r.Recovery = fmt.Sprintf("%v after the restart", waited.Round(time.Millisecond))
	r.Cmd = "go test -race -count=1 -run '^TestSnowflakeClockSteps$/^restart-" + source + "$' ./faults/"
	r.Note = fmt.Sprintf("-3 until the clock passed the mark; %d IDs before, %d after, all above the first run's; conn = requests cut by the stop", len(ids1), len(ids2))
	report.add(t, r)
}
