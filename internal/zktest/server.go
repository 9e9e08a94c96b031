package zktest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a private standalone ZooKeeper for one test, started from Debian's `zookeeper`
// package (the jars in /usr/share/java) with java: a temporary data directory, a zoo.cfg with a
// free loopback client port and the admin server off. Unlike the shared server of Addr, a test
// may kill it, restart it on the same data directory, or wipe that directory (a new ensemble).
// Its methods are not safe for concurrent use.
type Server struct {
	addr string
	dir  string // holds zoo.cfg, data/ and zookeeper.log
	java string // path of the java binary
	cp   string // java class path

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// serverJars are the jars of Debian's zookeeper package a standalone server needs, plus slf4j's
// simple binding (optional) so that its log says what happened.
var serverJars = []struct {
	name     string
	required bool
}{
	{"zookeeper.jar", true},
	{"zookeeper-jute.jar", true},
	{"slf4j-api.jar", true},
	{"slf4j-simple.jar", false},
}

// StartServer starts a private ZooKeeper and waits until it serves; it is killed when the test
// ends. When java or the zookeeper jars are missing, or the server does not come up, the test is
// skipped with what is missing, or fails when CI=true. In -short mode it skips the test without
// starting anything.
func StartServer(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("zktest: skipped in -short mode: needs a private ZooKeeper (java and the zookeeper jars)")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		unavailable(t, "java not found ("+err.Error()+"); install Debian's zookeeper package (it brings a JRE): apt-get install zookeeper")
	}
	var cp []string
	for _, j := range serverJars {
		p := filepath.Join("/usr/share/java", j.name)
		if _, err := os.Stat(p); err != nil {
			if j.required {
				unavailable(t, p+" not found; install Debian's zookeeper package: apt-get install zookeeper (bash .ci/zookeeper.sh does)")
			}
			continue
		}
		cp = append(cp, p)
	}
	s := &Server{addr: ClosedAddr(t), dir: t.TempDir(), java: java, cp: strings.Join(cp, ":")}
	_, port, _ := net.SplitHostPort(s.addr)
	cfg := fmt.Sprintf(`tickTime=1000
dataDir=%s
clientPort=%s
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,stat,srvr,cons,dump
autopurge.purgeInterval=0
`, filepath.Join(s.dir, "data"), port)
	if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("private ZooKeeper %s log (last 4 KiB):\n%s", s.addr, tail(s.Log(), 4096))
		}
	})
	if err := s.start(); err != nil {
		unavailable(t, "private ZooKeeper did not start: "+err.Error())
	}
	return s
}

// unavailable skips t with msg, or fails it when CI=true.
func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Addr is the server's client address, 127.0.0.1:<port>; it stays the same across restarts.
func (s *Server) Addr() string { return s.addr }

// Log returns everything the server logged (all runs).
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "zookeeper.log"))
	return string(b)
}

// Running reports whether the server process is up.
func (s *Server) Running() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL to the server and waits until it is gone: the ZooKeeper process dies
// without closing sessions or syncing anything. Idempotent.
func (s *Server) Kill() {
	if !s.Running() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Restart starts the killed server again on the same data directory and port, and waits until
// it serves (up to 30 s, retrying while the port is still held).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.Running() {
		t.Fatal("zktest: Restart of a running server")
	}
	if err := s.start(); err != nil {
		t.Fatalf("zktest: restart private ZooKeeper: %v", err)
	}
}

// Wipe empties the data directory of the stopped server: on the next Restart it has no nodes,
// no sessions and a zxid counter from zero, like a new ensemble (lost disks, a migration
// without data).
func (s *Server) Wipe(t testing.TB) {
	t.Helper()
	if s.Running() {
		t.Fatal("zktest: Wipe of a running server")
	}
	data := filepath.Join(s.dir, "data")
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
}

var startMu sync.Mutex // one JVM start at a time: they are CPU-heavy on two cores

func (s *Server) start() error {
	startMu.Lock()
	defer startMu.Unlock()
	logf, err := os.OpenFile(filepath.Join(s.dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	_, _ = fmt.Fprintf(logf, "---- zktest: start %s\n", time.Now().UTC().Format(time.RFC3339Nano)) // a marker line only
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command(s.java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
			"-cp", s.cp, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(s.dir, "zoo.cfg"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return err
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		s.cmd, s.done = cmd, done
		for {
			if serving(s.addr) {
				return nil
			}
			select {
			case <-done:
			case <-time.After(100 * time.Millisecond):
			}
			if !s.Running() || time.Now().After(deadline) {
				break
			}
		}
		if s.Running() { // still not answering at the deadline
			s.Kill()
			return fmt.Errorf("no answer on %s within 30 s; log:\n%s", s.addr, tail(s.Log(), 2048))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("exited (%v); log:\n%s", cmd.ProcessState, tail(s.Log(), 2048))
		}
		time.Sleep(300 * time.Millisecond) // e.g. the port still bound by the killed run
	}
}

// serving sends ZooKeeper's four-letter "srvr" and reports whether the server says it serves
// (its mode is in the answer). "ruok" is not enough: it answers "imok" as soon as the port is
// open, while the database is still loading, and a client that connects then may have its
// connection dropped or left unanswered.
func serving(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: ")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
