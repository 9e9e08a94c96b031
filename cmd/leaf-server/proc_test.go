package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serverBin is the leaf-server binary built once by TestMain.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leaf-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "leaf-server")
	args := []string{"build", "-o", serverBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build leaf-server:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one real leaf-server process on a loopback port.
type proc struct {
	cmd  *exec.Cmd
	addr string // host:port it listens on
	done chan struct{}

	mu  sync.Mutex // guards log
	log strings.Builder
}

var addrRe = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startServer runs leaf-server with args (plus --listen 127.0.0.1:0) in dir
// and waits up to 10 s for it to listen. It is killed when the test ends.
func startServer(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	args = append([]string{"--listen", "127.0.0.1:0"}, args...)
	cmd := exec.Command(serverBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LEAF_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start leaf-server: %v", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
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
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill9()
		if t.Failed() {
			t.Logf("leaf-server %v log:\n%s", args, p.logs())
		}
	})
	select {
	case p.addr = <-found:
	case <-p.done:
		t.Fatalf("leaf-server %v exited before listening:\n%s", args, p.logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("leaf-server %v did not listen within 20s:\n%s", args, p.logs())
	}
	return p
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) url(path string) string { return "http://" + p.addr + path }

var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 0},
}

// get fetches path and returns the status and body.
func (p *proc) get(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", p.url(path), nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// id fetches one segment ID for tag and fails the test on any error.
func (p *proc) id(t *testing.T, tag string) int64 {
	t.Helper()
	status, body, err := p.get(t.Context(), "/api/segment/get/"+tag)
	if err != nil || status != 200 {
		t.Fatalf("GET /api/segment/get/%s = %d %q, %v; want 200", tag, status, body, err)
	}
	n, err := strconv.ParseInt(body, 10, 64)
	if err != nil {
		t.Fatalf("GET /api/segment/get/%s body %q is not an integer", tag, body)
	}
	return n
}
