// Package servertest builds the real leaf-server binary and runs it as a
// child process on a loopback port, for end-to-end and fault tests that need
// a process they can kill -9, restart on the same data directory and put
// behind a fault proxy.
//
// Under `go test -short` (`make check`) [Run] builds nothing and [Start] and
// [SkipShort] skip the test: the quick loop starts no server process.
package servertest

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build compiles github.com/leaf-go/leaf/cmd/leaf-server into dir and returns
// the binary's path. race adds -race (use it when the tests themselves run
// with the race detector, so the server's races are caught too).
func Build(dir string, race bool) (string, error) { return BuildTags(dir, race) }

// BuildTags is Build with build tags, e.g. "leaftest" for the test hooks of
// cmd/leaf-server (LEAF_TEST_CLOCK_FILE). The binary is named after the tags
// so that builds with different tags can share dir.
func BuildTags(dir string, race bool, tags ...string) (string, error) {
	name := "leaf-server"
	if len(tags) > 0 {
		name += "-" + strings.Join(tags, "-")
	}
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "github.com/leaf-go/leaf/cmd/leaf-server")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build leaf-server: %w", err)
	}
	return bin, nil
}

// Options say how to start one server.
type Options struct {
	// Dir is the working directory (and, unless Args say otherwise, the
	// parent of ./data). Required.
	Dir string
	// Args are leaf-server flags; "--listen 127.0.0.1:0" is prepended, so a
	// later --listen wins.
	Args []string
	// Env is added to the test's environment (e.g. "TMPDIR=…").
	Env []string
	// StartTimeout bounds the wait for the "listening" log line; zero
	// means 20 s.
	StartTimeout time.Duration
	// DefaultWorkerSource leaves the snowflake worker-ID source to
	// leaf-server's own default. Without it, a server whose Args and Env
	// choose no source (no --worker-id-source, --worker-id or --config, no
	// LEAF_WORKER_ID_SOURCE or LEAF_WORKER_ID) is started with
	// --worker-id-source static, as every test server was before the
	// default became the SQL lease for a PostgreSQL or MySQL --segment-dsn
	// (docs/contract.md §5 rule 8): tests of segment mode need no lease, and a
	// lease claimed on a fresh database waits out any previous holder.
	DefaultWorkerSource bool
}

// choosesWorkerSource reports whether o names a worker-ID source or a
// static worker ID (or a leaf.properties file, which may).
func (o Options) choosesWorkerSource() bool {
	for _, a := range o.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "worker-id-source" || name == "worker-id" || name == "config") {
			return true
		}
	}
	for _, kv := range o.Env {
		if strings.HasPrefix(kv, "LEAF_WORKER_ID_SOURCE=") || strings.HasPrefix(kv, "LEAF_WORKER_ID=") || strings.HasPrefix(kv, "LEAF_CONFIG=") {
			return true
		}
	}
	return false
}

// Proc is one running leaf-server. Its methods are safe for concurrent use.
type Proc struct {
	cmd  *exec.Cmd
	addr string
	args []string
	done chan struct{}

	mu  sync.Mutex // guards log
	log strings.Builder
}

var addrRe = regexp.MustCompile(`msg=listening addr=(\S+)`)

// Start runs bin with o and waits until it listens. The process is killed
// (SIGKILL) when the test ends, and its log is printed if the test failed.
// In -short mode it skips the test ([SkipShort]).
func Start(t testing.TB, bin string, o Options) *Proc {
	t.Helper()
	SkipShort(t)
	p, err := start(bin, o)
	if p != nil {
		t.Cleanup(func() {
			p.Kill9()
			if t.Failed() {
				t.Logf("leaf-server %v log:\n%s", p.args, p.Logs())
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func start(bin string, o Options) (*Proc, error) {
	args := []string{"--listen", "127.0.0.1:0"}
	if !o.DefaultWorkerSource && !o.choosesWorkerSource() {
		args = append(args, "--worker-id-source", "static")
	}
	args = append(args, o.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = o.Dir
	cmd.Env = append(append(Environ(), "LEAF_LOG_LEVEL=info", "LEAF_LOG_FORMAT=text"), o.Env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start leaf-server: %w", err)
	}
	p := &Proc{cmd: cmd, args: args, done: make(chan struct{})}
	found := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := addrRe.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-copied // Wait closes the pipe: read it to the end first
		_ = cmd.Wait()
		close(p.done)
	}()
	timeout := o.StartTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	select {
	case p.addr = <-found:
		return p, nil
	case <-p.done:
		return p, fmt.Errorf("leaf-server %v exited before listening:\n%s", args, p.Logs())
	case <-time.After(timeout):
		return p, fmt.Errorf("leaf-server %v did not listen within %v:\n%s", args, timeout, p.Logs())
	}
}

// Environ returns the test process's environment without its LEAF_*
// variables other than LEAF_TEST_…: a server started by a test gets only the
// settings the test gives it. leaf-server refuses LEAF_* variables that are
// none of its settings, such as the test tools' own (LEAF_FAULTS_REPORT,
// LEAF_CHROMIUM), and a developer's LEAF_SEGMENT_DSN must not reach a test
// server either.
func Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEAF_") || strings.HasPrefix(kv, "LEAF_TEST_") {
			env = append(env, kv)
		}
	}
	return env
}

// Addr is the host:port the server listens on.
func (p *Proc) Addr() string { return p.addr }

// WaitReady waits until GET /readyz answers 200 (a lease source's first claim on a fresh
// database or namespace is held back for its TTL + margin, 12 s by default), or fails t after
// limit with the last answer.
func (p *Proc) WaitReady(t testing.TB, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		code, body, err := p.Get(context.Background(), "/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaf-server %s: /readyz %d %s (%v) after %v", p.addr, code, body, err, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL returns http://<addr><path>.
func (p *Proc) URL(path string) string { return "http://" + p.addr + path }

// Logs returns everything the server wrote to stderr so far.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill9 sends SIGKILL and waits for the process to be gone. Idempotent.
func (p *Proc) Kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitCode is the exit status after Done, -1 when killed by a signal.
func (p *Proc) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// Client is an HTTP client for test traffic: many idle connections per
// host, 10 s timeout.
var Client = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 256},
}

// Get fetches path with Client and returns the status and body.
func (p *Proc) Get(ctx context.Context, path string) (int, string, error) {
	return p.Do(ctx, http.MethodGet, path)
}

// Do sends a request without a body and returns the status and body.
func (p *Proc) Do(ctx context.Context, method, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.URL(path), nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := Client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// SkipShort skips t in -short mode, for a test that runs a server process
// (or another binary it builds) without going through [Start] first.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("servertest: skipped in -short mode: runs the leaf-server binary")
	}
}

// Run is a TestMain body: it builds leaf-server (with -race when Race) into a
// temporary directory, stores the binary's path in *bin, runs the tests,
// removes the directory, runs after (when non-nil) with the tests' exit code
// and exits with the code after returns. A failed build exits 1. In -short
// mode it builds nothing and leaves *bin empty: [Start] skips every test
// that would run it.
func Run(m *testing.M, bin *string, after func(code int) int) {
	flag.Parse() // testing.Short needs the flags; m.Run does not parse them again
	if testing.Short() {
		code := m.Run()
		if after != nil {
			code = after(code)
		}
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "leaf-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin, err = Build(dir, Race)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if after != nil {
		code = after(code)
	}
	os.Exit(code)
}
