package faults

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSQLLeasePeerClock: a live server on the SQL lease source whose clock is
// 30 s ahead (a -tags leaftest build with a clock offset): a new server with
// a correct clock refuses to start (exit 1) and names the peer and its
// offset (Twitter snowflake's start check, --max-peer-clock-skew 10 s). With
// the peer 2 s ahead (after its next renewal reported it), the new server
// starts and takes the next worker ID.
func TestSQLLeasePeerClock(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			sqlLeasePeerClock(t, kind)
		})
	}
}

func sqlLeasePeerClock(t *testing.T, kind string) {
	name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
	d := newDB(t, kind)
	args := []string{"--segment=false", "--worker-id-source", "sql", "--segment-dsn", d.direct}
	clk := newStepClock(t)
	clk.set(t, 30*time.Second)
	peer := startClocked(t, t.TempDir(), clk, args...)
	if w := status(t, peer).WorkerID; w != 0 {
		t.Fatalf("the peer got worker %d, want 0", w)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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
	if code != 1 {
		t.Errorf("leaf-server next to a peer 30 s ahead: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"this host is ", " s behind its peers", "peers: worker 0 (", "--max-peer-clock-skew"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("refusal does not mention %q:\n%s", want, out)
		}
	}
	line := "(none)"
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "--max-peer-clock-skew") {
			line = "`" + strings.ReplaceAll(l, "|", "/") + "`"
			break
		}
	}
	report.add(t, row{
		Scenario: "4 snowflake worker IDs", Size: "SQL lease (" + name + "), a live peer's clock 30 s ahead, new server started",
		Errors: map[string]int{fmt.Sprintf("exit %d", code): 1}, Recovery: "n/a (refused at start)",
		Cmd:  "go test -race -count=1 -run '^TestSQLLeasePeerClock$/^" + kind + "$' ./faults/",
		Note: fmt.Sprintf("refused in %v; message: %s", took.Round(time.Millisecond), line),
	})

	// 2 s ahead: reported with the peer's next renewals (every 3 s).
	clk.set(t, 2*time.Second)
	waitNextReports(t, peer, "renewals", 30*time.Second)
	p := start(t, t.TempDir(), args...)
	if w := status(t, p).WorkerID; w != 1 {
		t.Errorf("the new server next to a peer 2 s ahead got worker %d, want 1", w)
	}
	report.add(t, row{
		Scenario: "4 snowflake worker IDs", Size: "SQL lease (" + name + "), a live peer's clock 2 s ahead, new server started",
		Recovery: "n/a", Cmd: "go test -race -count=1 -run '^TestSQLLeasePeerClock$/^" + kind + "$' ./faults/",
		Note: "starts (within --max-peer-clock-skew 10 s) and takes worker 1",
	})
}
