package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/atomicfile"
)

func TestWritesDataDir(t *testing.T) {
	tests := []struct {
		name string
		give func(*Config)
		want bool
	}{
		{"defaults", func(*Config) {}, true},
		{"segment on another database", func(c *Config) { c.SegmentDSN = "postgres://h/db" }, true},
		{"static snowflake only", func(c *Config) { c.SegmentEnabled = false }, true},
		{"zookeeper snowflake only", func(c *Config) { c.SegmentEnabled, c.WorkerIDSource = false, "zookeeper" }, true},
		{"sql lease on the default SQLite file", func(c *Config) { c.SegmentEnabled, c.WorkerIDSource = false, "sql" }, true},
		{"sql lease on another database", func(c *Config) {
			c.SegmentEnabled, c.WorkerIDSource, c.SegmentDSN = false, "sql", "mysql://u:p@tcp(h:3306)/db"
		}, true},
		{"nothing on", func(c *Config) { c.SegmentEnabled, c.SnowflakeEnabled = false, false }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.give(&cfg)
			if got := cfg.writesDataDir(); got != tt.want {
				t.Errorf("writesDataDir() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLockDataDir: a second lock on a held dir fails naming the dir and the
// holder's PID; after release the dir can be locked again.
func TestLockDataDir(t *testing.T) {
	if !atomicfile.CanLock {
		t.Skip("the data dir is not locked on this system")
	}
	dir := filepath.Join(t.TempDir(), "data")
	release, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lockDataDir(%s) = %v", dir, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "LOCK")); strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("LOCK holds %q, want this PID %d", b, os.Getpid())
	}
	_, err = lockDataDir(dir)
	if !errors.Is(err, errDataDirInUse) {
		t.Fatalf("second lockDataDir(%s) = %v, want %v", dir, err, errDataDirInUse)
	}
	for _, want := range []string{dir, "process " + strconv.Itoa(os.Getpid()), "--data-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second lockDataDir error %q does not name %q", err, want)
		}
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	release, err = lockDataDir(dir)
	if err != nil {
		t.Fatalf("lockDataDir after release = %v", err)
	}
	if err := release(); err != nil {
		t.Errorf("second release = %v", err)
	}
}

// TestSecondServerRefused: two real servers started on one --data-dir (the
// default ./data of one working directory): the second exits 1 before
// listening, naming the dir and the first server's PID, and the first keeps
// serving. After kill -9 of the first, whose lock the kernel drops, a new
// server starts on the dir and continues above the first one's IDs.
func TestSecondServerRefused(t *testing.T) {
	if !atomicfile.CanLock {
		t.Skip("the data dir is not locked on this system")
	}
	t.Parallel()
	dir := t.TempDir()
	a := startServer(t, dir)
	pidA := lockedPID(t, a)
	idA := a.id(t, "leaf-segment-test")

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, "--listen", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LEAF_LOG_FORMAT=text")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second leaf-server on %s/data = %v, want exit status 1\n%s", dir, err, out)
	}
	wantMsg := "data dir in use by another leaf-server: " + filepath.Join(dir, "data") + " is locked by process " + strconv.Itoa(pidA)
	if !strings.Contains(string(out), wantMsg) {
		t.Errorf("second leaf-server said:\n%s\nwant it to say %q", out, wantMsg)
	}
	if strings.Contains(string(out), "msg=listening") || strings.Contains(string(out), "segment mode on") {
		t.Errorf("second leaf-server started serving before it was refused:\n%s", out)
	}
	if id := a.id(t, "leaf-segment-test"); id <= idA {
		t.Errorf("first server after the refusal: ID %d, want above %d", id, idA)
	}
	last := a.id(t, "leaf-segment-test")

	a.kill9()
	c := startServer(t, dir)
	if pidC := lockedPID(t, c); pidC == pidA {
		t.Errorf("new server logged PID %d, the dead one's", pidC)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data", "LOCK")); strings.TrimSpace(string(b)) != strconv.Itoa(lockedPID(t, c)) {
		t.Errorf("LOCK holds %q, want the new server's PID %d", b, lockedPID(t, c))
	}
	if id := c.id(t, "leaf-segment-test"); id <= last {
		t.Errorf("server started after kill -9: ID %d, want above %d", id, last)
	}
}

var lockedRe = regexp.MustCompile(`msg="locked data dir" dir=\S+ pid=(\d+)`)

// lockedPID is the PID p logged when it locked its data dir.
func lockedPID(t *testing.T, p *proc) int {
	t.Helper()
	m := lockedRe.FindStringSubmatch(p.logs())
	if m == nil {
		t.Fatalf("no \"locked data dir\" line in the log:\n%s", p.logs())
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}
