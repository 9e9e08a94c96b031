package main

import (
	"strconv"
	"syscall"
	"testing"
	"time"

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
		{name: "static kill -9", args: func(*testing.T) []string { return []string{"--worker-id", "3"} }, crash: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := servertest.Options{Dir: t.TempDir(), Args: append([]string{"--segment=false"}, tt.args(t)...),
				Env: []string{"TMPDIR=" + t.TempDir()}}
			p := servertest.Start(t, serverBin, opts)
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
