package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/zktest"
)

// TestGracefulRestartIssuesAtOnce: a server stopped with SIGTERM stores the
// exact last issued millisecond, so the first snowflake request after a
// restart (same data dir, same ZooKeeper cache dir) gets an ID, above every
// ID of the first run. Before, it answered -3 for up to the 3 s high-water
// window. After kill -9 the mark stored ahead stays: the first request of a
// quick restart is refused (-3), as it must be.
func TestGracefulRestartIssuesAtOnce(t *testing.T) {
	t.Parallel()
	zkArgs := func(t *testing.T) []string {
		addr := zktest.Addr(t)
		return []string{"--worker-id-source", "zookeeper", "--zk", addr, "--leaf-name", zktest.Name(t, addr),
			"--advertise-ip", "127.0.0.1", "--snowflake-port", "24390"}
	}
	tests := []struct {
		name  string
		args  func(t *testing.T) []string
		crash bool
	}{
		{name: "static", args: func(*testing.T) []string { return []string{"--worker-id", "3"} }},
		{name: "zookeeper", args: zkArgs},
		{name: "sql", args: func(t *testing.T) []string {
			return []string{"--worker-id-source", "sql", "--segment-dsn", dbtest.Postgres(t)}
		}},
		{name: "static kill -9", args: func(*testing.T) []string { return []string{"--worker-id", "3"} }, crash: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := servertest.Options{Dir: t.TempDir(), Args: append([]string{"--segment=false"}, tt.args(t)...),
				Env: []string{"TMPDIR=" + t.TempDir()}}
			p := servertest.Start(t, serverBin, opts)
			p.WaitReady(t, time.Minute) // sql: a fresh row has no history, held back TTL + margin
			var last int64
			for range 50 {
				code, body, err := p.Get(t.Context(), "/api/snowflake/get/x")
				if err != nil || code != 200 {
					t.Fatalf("first run: GET /api/snowflake/get/x = %d %q, %v", code, body, err)
				}
				last, _ = strconv.ParseInt(body, 10, 64)
			}
			if tt.crash {
				p.Kill9()
			} else if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("leaf-server did not exit within 20 s")
			}
			stopped := time.Now()
			if !tt.crash && p.ExitCode() != 0 {
				t.Fatalf("exit status %d after SIGTERM, want 0\n%s", p.ExitCode(), p.Logs())
			}
			p2 := servertest.Start(t, serverBin, opts)
			code, body, err := p2.Get(t.Context(), "/api/snowflake/get/x")
			if err != nil {
				t.Fatal(err)
			}
			if tt.crash {
				if since := time.Since(stopped); since < 2*time.Second && code == 200 {
					t.Errorf("first request %v after kill -9 = 200 %s, want -3 (the mark stored ahead must be waited out)", since.Round(time.Millisecond), body)
				}
				return
			}
			if code != 200 {
				t.Fatalf("first request %v after a graceful restart = %d %s, want an ID", time.Since(stopped).Round(time.Millisecond), code, body)
			}
			if id, _ := strconv.ParseInt(body, 10, 64); id <= last {
				t.Errorf("first ID after the restart %d, not above the first run's last %d", id, last)
			}
		})
	}
}

// TestPeerClockAtStart: a live Java Leaf peer in the namespace (a node
// uploaded just now) whose clock reads 30 s ahead makes a new server refuse
// to start, naming the peer; 2 s ahead, it starts.
func TestPeerClockAtStart(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	for _, ahead := range []time.Duration{30 * time.Second, 2 * time.Second} {
		t.Run(ahead.String(), func(t *testing.T) {
			name := zktest.Name(t, addr)
			conn := zktest.Conn(t, addr)
			for _, p := range []string{"/snowflake", "/snowflake/" + name, "/snowflake/" + name + "/forever"} {
				if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					t.Fatal(err)
				}
			}
			data := fmt.Sprintf(`{"ip":"10.9.9.9","port":"8080","timestamp":%d}`, time.Now().Add(ahead).UnixMilli())
			if _, err := conn.Create("/snowflake/"+name+"/forever/10.9.9.9:8080-", []byte(data), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, serverBin, "--listen", "127.0.0.1:0", "--segment=false", "--worker-id-source", "zookeeper",
				"--zk", addr, "--leaf-name", name, "--advertise-ip", "127.0.0.1", "--snowflake-port", "24391")
			cmd.Dir = t.TempDir()
			cmd.Env = append(cmd.Environ(), "TMPDIR="+t.TempDir())
			if ahead < 10*time.Second {
				p := servertest.Start(t, serverBin, servertest.Options{Dir: cmd.Dir, Args: cmd.Args[3:], Env: []string{"TMPDIR=" + t.TempDir()}})
				p.WaitReady(t, time.Minute) // a new node has no history: held back a session timeout + margin
				if code, body, err := p.Get(t.Context(), "/api/snowflake/get/x"); err != nil || code != 200 {
					t.Errorf("with a peer %v ahead: GET /api/snowflake/get/x = %d %s %v, want an ID", ahead, code, body, err)
				}
				return
			}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("with a peer %v ahead: exit %v, want 1\n%s", ahead, err, out)
			}
			for _, want := range []string{"off the live peers' clocks", "10.9.9.9:8080", "--max-peer-clock-skew"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("refusal does not say %q:\n%s", want, out)
				}
			}
		})
	}
}
