//go:build unix

// Package dbproctest runs a private PostgreSQL or MariaDB server as a child
// process of a test, on a fresh data directory and a free loopback port, so
// that a fault test can stop it, kill -9 it and start it again without
// touching the shared servers other tests use.
//
// PostgreSQL is initialised with initdb (trust authentication, user
// postgres) and runs as the operating-system user postgres when the test
// runs as root (initdb and postgres refuse root). MariaDB runs on an empty
// data directory with --skip-grant-tables (no mariadb-install-db: the
// system tables are not needed for leaf_alloc, and skipping them saves
// seconds). Both listen on 127.0.0.1 only, with their Unix socket inside
// the data directory.
//
// When a binary is missing or the server cannot start, the test is skipped
// with a message naming what is missing, or fails when CI=true. Under
// `go test -short` (`make check`) [New] skips without starting anything, even
// when CI=true.
package dbproctest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// StartTimeout bounds one start of a server, until it accepts a connection.
const StartTimeout = 60 * time.Second

// Kind names a server: "postgres" or "mysql" (MariaDB), as faults' db kinds.
type Kind string

// The kinds a Server can be.
const (
	Postgres Kind = "postgres"
	MariaDB  Kind = "mysql"
)

// Server is one private database server. Stop, Kill9 and Start may be called
// in any order from one goroutine; DSN and Port from any.
type Server struct {
	kind  Kind
	dir   string // data directory's parent: data/, sockets, log
	port  int
	bin   string // postgres or mariadbd
	cred  *syscall.Credential
	log   *os.File
	start []string // arguments of bin

	mu  sync.Mutex // guards cmd and done
	cmd *exec.Cmd
	// done is closed when cmd has exited; nil when nothing runs.
	done chan struct{}
}

// New initialises and starts a private server of kind. It is stopped (kill
// -9) and its directory removed when the test ends. In -short mode it skips
// the test.
func New(t testing.TB, kind Kind) *Server {
	t.Helper()
	if testing.Short() {
		t.Skipf("dbproc: skipped in -short mode: needs a private %s server (PostgreSQL or MariaDB binaries)", kind)
	}
	s, err := newServer(t, kind)
	if err != nil {
		unavailable(t, kind, err)
	}
	return s
}

func newServer(t testing.TB, kind Kind) (*Server, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "leaf-dbproc-"+string(kind)+"-")
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { log.Close() })
	s := &Server{kind: kind, dir: dir, port: port, log: log}
	data := filepath.Join(dir, "data")
	switch kind {
	case Postgres:
		bindir, err := postgresBin()
		if err != nil {
			return nil, err
		}
		if os.Geteuid() == 0 {
			cred, err := credential("postgres")
			if err != nil {
				return nil, fmt.Errorf("initdb and postgres refuse to run as root and there is no user postgres to run them as: %w", err)
			}
			s.cred = cred
			for _, p := range []string{dir, log.Name()} {
				if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
					return nil, err
				}
			}
		}
		initdb := exec.Command(filepath.Join(bindir, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		if out, err := initdb.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb: %w\n%s", err, out)
		}
		s.bin = filepath.Join(bindir, "postgres")
		// fsync=off: the faults are process deaths (stop, kill -9), which
		// lose nothing the kernel was given; a power cut is not simulated.
		s.start = []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=60",
			"-c", "shared_buffers=16MB"}
	case MariaDB:
		bin, err := lookPath("mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld")
		if err != nil {
			return nil, err
		}
		if err := os.Mkdir(data, 0o700); err != nil {
			return nil, err
		}
		s.bin = bin
		s.start = []string{"--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1", "--socket=" + filepath.Join(dir, "mysqld.sock"),
			"--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--skip-grant-tables", "--skip-name-resolve",
			"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M", "--max-connections=60"}
		if os.Geteuid() == 0 {
			s.start = append(s.start, "--user=root")
		}
	default:
		return nil, fmt.Errorf("dbproc: unknown kind %q", kind)
	}
	t.Cleanup(func() {
		s.Kill9(t)
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("dbproc %s log (last 4 KiB):\n%s", kind, tail(b, 4096))
		}
	})
	if err := s.run(); err != nil {
		return nil, err
	}
	if kind == MariaDB {
		db, err := sql.Open("mysql", s.rootDSN(""))
		if err != nil {
			return nil, err
		}
		defer db.Close()
		if _, err := db.Exec("CREATE DATABASE leaf"); err != nil {
			return nil, fmt.Errorf("create database leaf: %w", err)
		}
	}
	return s, nil
}

// DSN is the leaf-go DSN (store/dsn) of the server's database: postgres on
// PostgreSQL, leaf on MariaDB.
func (s *Server) DSN() string {
	if s.kind == Postgres {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	}
	return "mysql://" + s.rootDSN("leaf")
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Kind is what kind of server s is.
func (s *Server) Kind() Kind { return s.kind }

func (s *Server) rootDSN(db string) string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", s.Addr(), db
	return c.FormatDSN()
}

// Start starts the server again on the same data directory and port and
// waits until it accepts connections (after kill -9, once crash recovery is
// done). It fails the test when the server does not come up.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.run(); err != nil {
		t.Fatalf("dbproc: restart %s: %v", s.kind, err)
	}
}

// Stop shuts the server down cleanly and waits for it to exit: PostgreSQL's
// fast shutdown (SIGINT to the postmaster, as pg_ctl stop -m fast: open
// transactions are rolled back, clients disconnected), MariaDB's normal
// shutdown (SIGTERM).
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	sig := syscall.SIGTERM
	if s.kind == Postgres {
		sig = syscall.SIGINT
	}
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if done == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("dbproc: %s did not stop within 30 s of %v; killing it", s.kind, sig)
		s.Kill9(t)
	}
	s.mu.Lock()
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
}

// Kill9 sends SIGKILL to the server's whole process group (PostgreSQL's
// postmaster and every backend at once, as the OOM killer or a container
// runtime would) and waits for the main process to exit. Idempotent.
func (s *Server) Kill9(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if done == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// run starts bin and waits until a client can connect.
func (s *Server) run() error {
	var lastErr error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(500 * time.Millisecond) // a killed server's backends may still be exiting
		}
		cmd := exec.Command(s.bin, s.start...)
		cmd.Stdout, cmd.Stderr = s.log, s.log
		// Own process group: Kill9 reaches every backend.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", s.bin, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		s.mu.Lock()
		s.cmd, s.done = cmd, done
		s.mu.Unlock()
		if lastErr = s.waitReady(done); lastErr == nil {
			return nil
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		s.mu.Lock()
		s.cmd, s.done = nil, nil
		s.mu.Unlock()
	}
	b, _ := os.ReadFile(s.log.Name())
	return fmt.Errorf("%s did not accept connections: %w; log:\n%s", s.bin, lastErr, tail(b, 2048))
}

func (s *Server) waitReady(done <-chan struct{}) error {
	deadline := time.Now().Add(StartTimeout)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return errors.New("exited")
		default:
		}
		if err = s.ping(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %v: %w", StartTimeout, err)
}

func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.kind == Postgres {
		c, err := pgx.Connect(ctx, s.DSN())
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return c.Ping(ctx)
	}
	db, err := sql.Open("mysql", s.rootDSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

// postgresBin finds the directory of initdb and postgres: PATH, then the
// newest /usr/lib/postgresql/<version>/bin.
func postgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("initdb and postgres not found in PATH or /usr/lib/postgresql/*/bin (apt-get install postgresql)")
}

func lookPath(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %v found (apt-get install mariadb-server)", names)
}

func credential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func unavailable(t testing.TB, kind Kind, err error) {
	t.Helper()
	msg := fmt.Sprintf("dbproc: cannot run a private %s server: %v", kind, err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
