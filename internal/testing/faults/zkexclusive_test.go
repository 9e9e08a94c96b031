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

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake"
)

// runRefused runs leaf-server with args until it exits (at most limit) and
// returns its exit code, output and how long it ran.
func runRefused(t testing.TB, limit time.Duration, env []string, args ...string) (int, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cmd.Environ(), env...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(t0)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out), took
	case err != nil:
		return -1, string(out) + err.Error(), took
	}
	return 0, string(out), took
}

// readyzBody returns /readyz's status and body.
func readyzBody(p *servertest.Proc) (int, string) {
	code, body, err := p.Get(context.Background(), "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	return code, body
}

// TestZooKeeperSameAddress: one server holds a ZooKeeper identity
// (--advertise-ip 10.23.0.1 --snowflake-port 24380: two Docker hosts on the
// default bridge, a force-deleted pod and its replacement) and serves under
// load; two more processes with the same identity start meanwhile, one
// spelling the address as an IPv4-mapped IPv6 address. Both refuse to start
// (exit 1) after waiting out the session timeout, naming the holder; the
// holder keeps serving; no ID repeats. Leaf (and leaf-go before) let both
// issue: 80,113 duplicates of 871,435 in 20 s.
func TestZooKeeperSameAddress(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	args := func(ip string) []string {
		return []string{"--segment=false", "--worker-id-source", "zookeeper", "--zk", addr, "--leaf-name", name,
			"--advertise-ip", ip, "--snowflake-port", "24380"}
	}
	a := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args("10.23.0.1"), Env: []string{"TMPDIR=" + t.TempDir()}})
	a.WaitReady(t, 90*time.Second) // a new node has no history: held back a session timeout + margin
	wa := status(t, a).WorkerID
	tl := newTally(time.Second+slack, 10*time.Second)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() {
		drive(ctx, []target{
			{srv: func() *servertest.Proc { return a }, path: "/api/v1/snowflake?count=1000", batch: true, tally: tl},
			{srv: func() *servertest.Proc { return a }, path: "/api/v1/snowflake?count=1000", batch: true, tally: tl},
		})
	})
	type refusal struct {
		code int
		out  string
		took time.Duration
	}
	ips := []string{"10.23.0.1", "::ffff:10.23.0.1"}
	res := make([]refusal, len(ips))
	var rw sync.WaitGroup
	for i, ip := range ips {
		rw.Go(func() {
			c, o, d := runRefused(t, 60*time.Second, []string{"TMPDIR=" + t.TempDir()}, args(ip)...)
			res[i] = refusal{c, o, d}
		})
	}
	rw.Wait()
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()

	for i, r := range res {
		if r.code != 1 {
			t.Errorf("second server (--advertise-ip %s): exit %d, want 1\n%s", ips[i], r.code, r.out)
		}
		for _, want := range []string{"leased to another live process", "10.23.0.1:24380", "pid"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("second server (--advertise-ip %s): refusal does not say %q:\n%s", ips[i], want, r.out)
			}
		}
		if strings.Contains(r.out, "msg=listening") {
			t.Errorf("second server (--advertise-ip %s) listened:\n%s", ips[i], r.out)
		}
	}
	if code, body := readyzBody(a); code != 200 {
		t.Errorf("holder's /readyz = %d %s after the refusals, want 200", code, body)
	}
	checkWorker(t, tl, wa)
	r := check(t, tl, nil, "")
	if len(r.Errors) > 0 {
		t.Errorf("holder answered errors %v, want none", r.Errors)
	}
	msg := ""
	for _, l := range strings.Split(res[0].out, "\n") {
		if strings.Contains(l, "leased to another live process") {
			msg = "`" + strings.ReplaceAll(tail(l, 260), "|", "/") + "`"
		}
	}
	r.Scenario, r.Cmd = "4 snowflake worker IDs", "go test -race -count=1 -run '^TestZooKeeperSameAddress$' ./faults/"
	r.Size = "ZooKeeper source, holder under load + 2 servers with the same identity (10.23.0.1:24380, once as ::ffff:10.23.0.1)"
	r.Recovery = "n/a"
	r.Note = fmt.Sprintf("both refused (exit %d, %d) after %v and %v (session timeout 6 s + 2 s for a crashed holder); holder worker %d kept serving; message: %s",
		res[0].code, res[1].code, res[0].took.Round(100*time.Millisecond), res[1].took.Round(100*time.Millisecond), wa, msg)
	report.add(t, r)
}

// TestZooKeeperRuntimeConflict: a server serves under load on the shared
// ZooKeeper; then its claim is broken behind its back: a Java Leaf node on
// the same ip:port uploads its timestamp to the server's /forever node, or an
// operator deletes the namespace. The server loses its lease at its next
// contact or upload: /readyz 503 with the reason, no ID dated after that
// until it has claimed again (without a restart: the new claim waits out a
// previous holder, a full session timeout + margin) and serves again. (The
// wiped-ZooKeeper case is TestZooKeeperWipedLease.)
func TestZooKeeperRuntimeConflict(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	tests := []struct {
		name    string
		port    string
		breakIt func(t *testing.T, name, node string)
		want    string
	}{
		{
			name: "Java Leaf uploads to the node", port: "24385",
			breakIt: func(t *testing.T, name, node string) {
				data := fmt.Sprintf(`{"ip":"127.0.0.1","port":"24385","timestamp":%d}`, time.Now().UnixMilli())
				if _, err := zktest.Conn(t, addr).Set(node, []byte(data), -1); err != nil {
					t.Fatal(err)
				}
			},
			want: "another process wrote the node",
		},
		{
			name: "namespace deleted", port: "24386",
			breakIt: func(t *testing.T, name, node string) {
				if err := zktest.DeleteTree(zktest.Conn(t, addr), "/snowflake/"+name); err != nil {
					t.Fatal(err)
				}
			},
			want: "deleted", // the live node (contact) or the /forever node (upload), whichever is found first
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := zktest.Name(t, addr)
			p := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Env: []string{"TMPDIR=" + t.TempDir()},
				Args: []string{"--segment=false", "--worker-id-source", "zookeeper", "--zk", addr, "--leaf-name", name,
					"--advertise-ip", "127.0.0.1", "--snowflake-port", tt.port}})
			p.WaitReady(t, 90*time.Second) // a new node has no history: held back a session timeout + margin
			var st struct {
				WorkerID    int64 `json:"workerId"`
				SourceState struct {
					Node string `json:"node"`
				} `json:"sourceState"`
			}
			_, body, _ := p.Get(context.Background(), "/api/v1/snowflake/status")
			if err := json.Unmarshal([]byte(body), &st); err != nil || st.SourceState.Node == "" {
				t.Fatalf("status %s: %v, want the node", body, err)
			}
			tl := newTally(time.Second+slack, 10*time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				drive(ctx, []target{{srv: func() *servertest.Proc { return p }, path: "/api/v1/snowflake?count=1000", batch: true, tally: tl}})
			})
			defer func() { cancel(); wg.Wait() }()
			time.Sleep(time.Second)
			broken := time.Now()
			tt.breakIt(t, name, st.SourceState.Node)
			var stopped time.Time
			var reason string
			for time.Since(broken) < 10*time.Second {
				if code, b := readyzBody(p); code == 503 {
					stopped, reason = time.Now(), b
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if stopped.IsZero() {
				t.Fatalf("/readyz not 503 within 10 s of the conflict")
			}
			if !strings.Contains(reason, tt.want) {
				t.Errorf("/readyz body %s, want the reason %q", reason, tt.want)
			}
			// It claims again without a restart; nothing is issued in between.
			back := waitServing(t, p, 90*time.Second)
			time.Sleep(time.Second)
			cancel()
			wg.Wait()
			if n := idsBetween(tl, stopped, back.Add(-time.Second)); n > 0 {
				t.Errorf("%d IDs dated after /readyz turned 503 and before the new claim served", n)
			}
			ids, errs, worst, bad := tl.snapshot()
			for _, v := range bad {
				t.Errorf("contract: %s", v)
			}
			dups, first := duplicates(ids)
			if dups > 0 {
				t.Errorf("%d IDs repeated, e.g. %v", dups, first)
			}
			report.add(t, row{
				Scenario: "4 snowflake worker IDs", Size: "ZooKeeper source under load, then: " + tt.name,
				IDs: len(ids), Dups: dups, Errors: errs, Worst: worst, Recovery: fmt.Sprintf("claimed again, serving %v after the conflict", back.Sub(broken).Round(100*time.Millisecond)),
				Cmd: "go test -race -count=1 -run '^TestZooKeeperRuntimeConflict$' ./faults/",
				Note: fmt.Sprintf("/readyz 503 %v after the conflict (contacts every 1 s, uploads every 3 s), no ID dated after it until the new claim; reason: %.160s",
					stopped.Sub(broken).Round(10*time.Millisecond), reason),
			})
		})
	}
}

// idsBetween counts the IDs of tl dated after from and before to.
func idsBetween(tl *tally, from, to time.Time) int {
	ids, _, _, _ := tl.snapshot()
	n := 0
	for _, id := range ids {
		if ts := snowflake.Decompose(id).Time(); ts.After(from) && ts.Before(to) {
			n++
		}
	}
	return n
}
