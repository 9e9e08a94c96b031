//go:build unix

// Package galeratest runs a private MariaDB Galera cluster (multi-master,
// synchronous replication; Debian's galera-4) as child processes of a test,
// on loopback ports of its own, so that a fault test can kill -9 a node,
// isolate one from the others and let it rejoin without touching the shared
// servers other tests use (the multi-node counterpart of internal/dbproctest).
//
// Each node is mariadbd with the Galera provider, a data directory of its
// own and four free loopback ports (SQL, group communication, IST, SST).
// The first node bootstraps the cluster from a data directory made by
// mariadb-install-db; the others join by rsync state transfer (SST), and a
// restarted node catches up by IST from a peer's gcache. When the test runs
// as root the nodes run as the user mysql (--user=mysql), which the rsync
// state transfer needs. --skip-grant-tables: user root without a password
// over TCP.
//
// Bringing up three nodes takes about 40 s on 2 cores (two state transfers),
// so New skips under `go test -short`, and also when a binary is missing
// (mariadbd, mariadb-install-db, rsync, the galera-4 library), naming it; with
// CI=true it fails instead.
package galeratest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// SyncTimeout bounds how long a node may take to join and sync (state
// transfer included).
const SyncTimeout = 120 * time.Second

// DB is the database New creates on the cluster.
const DB = "leaf"

// providers are where Debian's galera-4 (and galera-3) put the provider.
var providers = []string{"/usr/lib/galera/libgalera_smm.so", "/usr/lib/galera-4/libgalera_smm.so", "/usr/lib/libgalera_smm.so"}

// Cluster is a private Galera cluster. Its methods may be called from one
// goroutine at a time; DSN and HostsDSN from any.
type Cluster struct {
	Nodes []*Node
	dir   string
}

// Node is one mariadbd of a Cluster.
type Node struct {
	name      string
	dir       string
	port      int // SQL
	gport     int // group communication (gmcast)
	cluster   string
	start     []string // arguments after the first start
	bootstrap []string // arguments of the first node's first start
	bin       string
	cred      *syscall.Credential

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited; nil when nothing runs
}

// New starts a cluster of n nodes (3 for a primary component that survives
// the loss of one), waits until every node is synced and creates database
// DB. The nodes are killed and their directories removed when the test ends.
func New(t testing.TB, n int) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("galera: a private cluster takes about 40 s to start; skipped with -short")
	}
	c, err := newCluster(t, n)
	if err != nil {
		msg := fmt.Sprintf("galera: cannot start a private cluster: %v (apt-get install mariadb-server galera-4 rsync)", err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return c
}

func newCluster(t testing.TB, n int) (*Cluster, error) {
	t.Helper()
	bin, err := look("mariadbd", "/usr/sbin/mariadbd")
	if err != nil {
		return nil, err
	}
	install, err := look("mariadb-install-db", "/usr/bin/mariadb-install-db")
	if err != nil {
		return nil, err
	}
	if _, err := look("rsync", "/usr/bin/rsync"); err != nil {
		return nil, err
	}
	provider := ""
	for _, p := range providers {
		if _, err := os.Stat(p); err == nil {
			provider = p
			break
		}
	}
	if provider == "" {
		return nil, fmt.Errorf("no Galera provider in %v", providers)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the user mysql for the nodes: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "leaf-galera-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	t.Cleanup(func() {
		for _, nd := range c.Nodes {
			nd.kill()
		}
		if t.Failed() {
			for _, nd := range c.Nodes {
				b, _ := os.ReadFile(nd.logPath())
				t.Logf("galera %s log (last 3 KiB):\n%s", nd.name, tail(b, 3072))
			}
		}
		_ = os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	var gaddrs []string
	for i := range n {
		nd := &Node{name: "n" + strconv.Itoa(i+1), dir: filepath.Join(dir, "n"+strconv.Itoa(i+1)), bin: bin, cred: cred}
		for _, d := range []string{nd.dir, filepath.Join(nd.dir, "data")} {
			if i == 0 && d != nd.dir {
				break // mariadb-install-db makes the first node's
			}
			if err := os.Mkdir(d, 0o755); err != nil {
				return nil, err
			}
			if cred != nil {
				if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
					return nil, err
				}
			}
		}
		ports, err := freePorts(4)
		if err != nil {
			return nil, err
		}
		nd.port, nd.gport = ports[0], ports[1]
		ist, sst := ports[2], ports[3]
		gaddrs = append(gaddrs, "127.0.0.1:"+strconv.Itoa(nd.gport))
		nd.start = []string{"--no-defaults", "--datadir=" + filepath.Join(nd.dir, "data"),
			"--port=" + strconv.Itoa(nd.port), "--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(nd.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(nd.dir, "mysqld.pid"),
			"--skip-grant-tables", "--skip-name-resolve", "--max-connections=100",
			"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M", "--innodb-flush-log-at-trx-commit=2",
			"--binlog-format=ROW", "--default-storage-engine=InnoDB", "--innodb-autoinc-lock-mode=2",
			"--wsrep-on=ON", "--wsrep-provider=" + provider, "--wsrep-cluster-name=leaf-test",
			"--wsrep-node-name=" + nd.name, "--wsrep-node-address=127.0.0.1:" + strconv.Itoa(nd.gport),
			"--wsrep-sst-method=rsync", "--wsrep-sst-receive-address=127.0.0.1:" + strconv.Itoa(sst),
			// Short failure detection: a dead or isolated node leaves the
			// primary component in about 3 s instead of Galera's 15 s.
			"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:" + strconv.Itoa(nd.gport) +
				";ist.recv_addr=127.0.0.1:" + strconv.Itoa(ist) + ";gcache.size=64M" +
				";evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S" +
				";evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S;evs.install_timeout=PT3S"}
		if cred != nil {
			nd.start = append(nd.start, "--user=mysql")
		}
		c.Nodes = append(c.Nodes, nd)
	}
	for _, nd := range c.Nodes {
		nd.cluster = "--wsrep-cluster-address=gcomm://" + strings.Join(gaddrs, ",")
	}
	first := c.Nodes[0]
	inst := exec.Command(install, "--no-defaults", "--datadir="+filepath.Join(first.dir, "data"),
		"--skip-test-db", "--auth-root-authentication-method=normal")
	inst.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := inst.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, tail(out, 2048))
	}
	first.bootstrap = append(append([]string{}, first.start...), "--wsrep-cluster-address=gcomm://", "--wsrep-new-cluster")
	if err := first.run(first.bootstrap); err != nil {
		return nil, err
	}
	if err := first.waitSynced(SyncTimeout); err != nil {
		return nil, err
	}
	for _, nd := range c.Nodes[1:] {
		if err := nd.run(nd.args()); err != nil {
			return nil, err
		}
	}
	for _, nd := range c.Nodes[1:] {
		if err := nd.waitSynced(SyncTimeout); err != nil {
			return nil, err
		}
	}
	db, err := sql.Open("mysql", first.rootDSN(""))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + DB); err != nil {
		return nil, fmt.Errorf("create database %s: %w", DB, err)
	}
	return c, nil
}

// HostsDSN is the leaf-go DSN (store/dsn) of database DB listing the nodes
// idx (all nodes in order when none are given), with params (for example
// "wsrep_sync_wait=1") appended.
func (c *Cluster) HostsDSN(params string, idx ...int) string {
	if len(idx) == 0 {
		for i := range c.Nodes {
			idx = append(idx, i)
		}
	}
	var addrs []string
	for _, i := range idx {
		addrs = append(addrs, c.Nodes[i].Addr())
	}
	d := "mysql://root@tcp(" + strings.Join(addrs, ",") + ")/" + DB
	if params != "" {
		d += "?" + params
	}
	return d
}

// Name is the node's name: n1, n2, …
func (n *Node) Name() string { return n.name }

// Addr is the node's SQL host:port.
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// DSN is the leaf-go DSN of database DB on this node alone.
func (n *Node) DSN() string { return "mysql://" + n.rootDSN(DB) }

func (n *Node) rootDSN(db string) string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", n.Addr(), db
	c.Timeout = 2 * time.Second
	return c.FormatDSN()
}

func (n *Node) logPath() string { return filepath.Join(n.dir, "mariadbd.log") }

// args are the arguments of every start but the bootstrap.
func (n *Node) args() []string { return append(append([]string{}, n.start...), n.cluster) }

// run starts mariadbd with args in a process group of its own (the state
// transfer's rsync runs in it too).
func (n *Node) run(args []string) error {
	log, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // killed on purpose: its exit status says nothing
		_ = log.Close()
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return nil
}

// Kill9 kills the node (and its state transfer, if one runs) with SIGKILL
// and waits until it has exited.
func (n *Node) Kill9(t testing.TB) {
	t.Helper()
	n.kill()
}

func (n *Node) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd, n.done = nil, nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // already gone is fine
	<-done
}

// Start starts a killed node again on its data directory; it rejoins the
// cluster (IST from a peer's gcache, or SST) and Start waits until it is
// synced. It fails the test when the node does not sync within SyncTimeout.
func (n *Node) Start(t testing.TB) {
	t.Helper()
	if err := n.run(n.args()); err != nil {
		t.Fatalf("galera: %v", err)
	}
	if err := n.waitSynced(SyncTimeout); err != nil {
		t.Fatalf("galera: %v", err)
	}
}

// Isolate cuts the node off the group communication (Galera's
// gmcast.isolate): it leaves the primary component and, alone, refuses
// statements (1047) until Heal.
func (n *Node) Isolate(t testing.TB) {
	t.Helper()
	n.providerOption(t, "gmcast.isolate=1")
}

// Heal reconnects an isolated node and waits until it is synced again.
func (n *Node) Heal(t testing.TB) {
	t.Helper()
	n.providerOption(t, "gmcast.isolate=0")
	if err := n.waitSynced(SyncTimeout); err != nil {
		t.Fatalf("galera: %v", err)
	}
}

func (n *Node) providerOption(t testing.TB, opt string) {
	t.Helper()
	db, err := sql.Open("mysql", n.rootDSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("SET GLOBAL wsrep_provider_options = ?", opt); err != nil {
		t.Fatalf("galera: %s on %s: %v", opt, n.name, err)
	}
}

// Status returns the node's wsrep status variables (wsrep_ready,
// wsrep_cluster_status, wsrep_cluster_size, wsrep_local_state_comment, …);
// an error when the node does not answer.
func (n *Node) Status() (map[string]string, error) {
	db, err := sql.Open("mysql", n.rootDSN(""))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep%'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, rows.Err()
}

// WaitStatus waits until the node's status variable name has value want,
// or fails the test after limit.
func (n *Node) WaitStatus(t testing.TB, name, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		if st, err := n.Status(); err == nil {
			last = st[name]
			if strings.EqualFold(last, want) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("galera: %s %s = %q after %v, want %q", n.name, name, last, limit, want)
}

// waitSynced waits until the node is in the primary component, ready and
// synced, or its process exits.
func (n *Node) waitSynced(limit time.Duration) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-done:
			b, _ := os.ReadFile(n.logPath())
			return fmt.Errorf("%s exited while joining:\n%s", n.name, tail(b, 2048))
		default:
		}
		st, err := n.Status()
		if err == nil {
			last = fmt.Sprintf("ready=%s status=%s state=%s", st["wsrep_ready"], st["wsrep_cluster_status"], st["wsrep_local_state_comment"])
			if st["wsrep_ready"] == "ON" && st["wsrep_cluster_status"] == "Primary" && st["wsrep_local_state_comment"] == "Synced" {
				return nil
			}
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not synced after %v (%s)", n.name, limit, last)
}

func look(name, fallback string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if _, err := os.Stat(fallback); err == nil {
		return fallback, nil
	}
	return "", fmt.Errorf("%s not found", name)
}

// freePorts returns n distinct free loopback ports (held open together so
// that none is handed out twice).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
