//go:build unix

// Package etcdtest starts a private 3-member etcd cluster for one test, from Debian's
// etcd-server package (/usr/bin/etcd; .ci/run installs it), on loopback ports of its own,
// with helpers to stop, kill, pause (SIGSTOP) and restart members and to find the leader.
//
// Skip rules as internal/zktest and internal/dbproctest: under -short the test is skipped without
// starting anything; when the etcd binary is missing or the cluster does not come up, the test
// is skipped with how to install it, or fails when CI=true.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"github.com/leaf-go/leaf/internal/porttest"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Members is the size of a cluster started by Start: 3, so that one member may fail and a
// second takes the quorum away.
const Members = 3

// Port range: etcdtest takes its client and peer ports from [PortLow, PortHigh], the range
// set aside for the etcd tests of this repository, skipping ports that are in use; so two test
// processes may each run a cluster at once.
const (
	PortLow  = 24200
	PortHigh = 24299
)

// Cluster is a running private etcd cluster. Its methods are not safe for concurrent use.
type Cluster struct {
	bin     string
	dir     string
	members []*Member
}

// Member is one etcd process of a Cluster.
type Member struct {
	Name   string // m0, m1, m2
	Client string // client address, 127.0.0.1:<port>
	Peer   string // peer address, 127.0.0.1:<port>

	c    *Cluster
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a 3-member cluster and waits until it has a leader; the members are killed when
// the test ends (and their logs shown if it failed).
func Start(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("etcdtest: skipped in -short mode: needs a private etcd cluster (/usr/bin/etcd)")
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		unavailable(t, "etcd not found ("+err.Error()+"); install Debian's etcd-server: apt-get install etcd-server etcd-client (.ci/run does)")
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c, err := start(t, bin)
		if err == nil {
			return c
		}
		lastErr = err
	}
	unavailable(t, "private etcd cluster did not start: "+lastErr.Error())
	return nil
}

// dumpLogs keeps the members' logs of a failed test: whole in a file under
// $LEAF_TEST_ARTIFACTS (else the system's temporary directory), and only their
// last lines in the test log, so that the test's own failure messages stay near
// the end of the output, where a CI log's tail shows them.
func dumpLogs(t testing.TB, members []*Member) {
	dir := os.Getenv("LEAF_TEST_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	for _, m := range members {
		path := filepath.Join(dir, "etcd-"+name+"-"+m.Name+".log")
		where := path
		if err := os.MkdirAll(dir, 0o755); err != nil {
			where = err.Error()
		} else if err := os.WriteFile(path, []byte(m.Log()), 0o644); err != nil {
			where = err.Error()
		}
		t.Logf("etcd member %s (%s): whole log in %s; last 400 bytes:\n%s", m.Name, m.Client, where, tail(m.Log(), 400))
	}
}

func start(t testing.TB, bin string) (*Cluster, error) {
	ports, err := freePorts(2 * Members)
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: t.TempDir()}
	var initial []string
	for i := range Members {
		m := &Member{
			Name:   "m" + strconv.Itoa(i),
			Client: "127.0.0.1:" + strconv.Itoa(ports[2*i]),
			Peer:   "127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
			c:      c,
		}
		m.dir = filepath.Join(c.dir, m.Name)
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			return nil, err
		}
		c.members = append(c.members, m)
		initial = append(initial, m.Name+"=http://"+m.Peer)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.Kill()
		}
		if t.Failed() {
			dumpLogs(t, c.members)
		}
	})
	for _, m := range c.members {
		if err := m.run(strings.Join(initial, ",")); err != nil {
			for _, m := range c.members {
				m.Kill()
			}
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.waitLeader(ctx); err != nil {
		for _, m := range c.members {
			m.Kill()
		}
		return nil, err
	}
	return c, nil
}

// run starts the member's process on its data directory.
func (m *Member) run(initialCluster string) error {
	logf, err := os.OpenFile(filepath.Join(m.c.dir, m.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	state := "new"
	if _, err := os.Stat(filepath.Join(m.dir, "member")); err == nil {
		state = "existing"
	}
	cmd := exec.Command(m.c.bin,
		"--name", m.Name,
		"--data-dir", m.dir,
		"--listen-client-urls", "http://"+m.Client,
		"--advertise-client-urls", "http://"+m.Client,
		"--listen-peer-urls", "http://"+m.Peer,
		"--initial-advertise-peer-urls", "http://"+m.Peer,
		"--initial-cluster", initialCluster,
		"--initial-cluster-state", state,
		"--initial-cluster-token", "leaf-etcdtest",
		"--heartbeat-interval", "100",
		"--election-timeout", "1000",
		"--logger", "zap",
		"--log-outputs", "stderr",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	m.cmd = cmd
	m.done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(m.done)
	}()
	return nil
}

// Endpoints returns the members' client addresses (host:port), whether running or not.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.Client
	}
	return eps
}

// Member returns member i, 0..Members-1.
func (c *Cluster) Member(i int) *Member { return c.members[i] }

// Client returns a client on every member, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Leader returns the index of the current leader, waiting up to 30 s for one.
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	i, err := c.waitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// waitLeader asks every running member for the leader until one member reports a leader that
// is itself a running member.
func (c *Cluster) waitLeader(ctx context.Context) (int, error) {
	var lastErr error
	for {
		for _, m := range c.members {
			if !m.Running() {
				continue
			}
			i, err := m.leader(ctx)
			if err == nil {
				return i, nil
			}
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no etcd leader: %w (last: %v)", ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leader asks m which member leads.
func (m *Member) leader(ctx context.Context) (int, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Client}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return -1, err
	}
	defer func() { _ = cli.Close() }()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := cli.Status(sctx, m.Client)
	if err != nil {
		return -1, err
	}
	if st.Leader == 0 {
		return -1, errors.New(m.Name + " has no leader")
	}
	ml, err := cli.MemberList(sctx)
	if err != nil {
		return -1, err
	}
	for _, mem := range ml.Members {
		if mem.ID != st.Leader {
			continue
		}
		for i, o := range m.c.members {
			if mem.Name == o.Name && o.Running() {
				return i, nil
			}
		}
	}
	return -1, fmt.Errorf("%s reports leader %x, not a running member", m.Name, st.Leader)
}

// Running reports whether the member's process is up (a paused one counts as up).
func (m *Member) Running() bool {
	if m.done == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Stop stops the member with SIGTERM and waits for it to exit (SIGKILL after 10 s).
func (m *Member) Stop() {
	if !m.Running() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGCONT)
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		m.Kill()
	}
}

// Kill kills the member with SIGKILL and waits for it to exit.
func (m *Member) Kill() {
	if !m.Running() {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.done
}

// Pause stops the member with SIGSTOP; Resume continues it.
func (m *Member) Pause() { _ = m.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused member with SIGCONT.
func (m *Member) Resume() { _ = m.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts a stopped or killed member again on its data directory and waits until its
// client port answers.
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	if m.Running() {
		t.Fatalf("etcdtest: %s is running", m.Name)
	}
	var initial []string
	for _, o := range m.c.members {
		initial = append(initial, o.Name+"=http://"+o.Peer)
	}
	if err := m.run(strings.Join(initial, ",")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", m.Client, 200*time.Millisecond); err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("etcdtest: %s did not listen on %s after restart", m.Name, m.Client)
}

// Log returns everything the member logged (all runs).
func (m *Member) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.c.dir, m.Name+".log"))
	return string(b)
}

// portRange is the loopback ports of this test bed, [PortLow, PortHigh].
var portRange = porttest.NewRange(PortLow, PortHigh)

// freePorts returns n ports of [PortLow, PortHigh] that nobody listens on now.
func freePorts(n int) ([]int, error) { return portRange.Free(n) }

// unavailable skips t with msg, or fails it when CI=true.
func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
