package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// serverBin is the leaf-server binary built once by TestMain.
var serverBin string

// TestMain builds leaf-server, runs the tests and then checks that no
// goroutine outlived them (the client's refills are owned by Close).
func TestMain(m *testing.M) {
	servertest.Run(m, &serverBin, func(code int) int {
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				return 1
			}
		}
		return code
	})
}

// proc is one real leaf-server process on a loopback port.
type proc struct {
	*servertest.Proc
	addr string // host:port it listens on
}

// startServer runs leaf-server with args (plus --listen 127.0.0.1:0) in dir,
// waits for it to listen and to be ready (/readyz 200). It is killed when the
// test ends.
func startServer(t testing.TB, dir string, args ...string) *proc {
	t.Helper()
	sp := servertest.Start(t, serverBin, servertest.Options{Dir: dir, Args: args, StartTimeout: 30 * time.Second})
	p := &proc{Proc: sp, addr: sp.Addr()}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _ := p.get(t, "/readyz")
		if status == http.StatusOK {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaf-server %v not ready within 20s:\n%s", args, p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill9 kills the process with SIGKILL and waits until it is gone.
func (p *proc) kill9() { p.Kill9() }

// base is the server's base URL.
func (p *proc) base() string { return "http://" + p.addr }

// get fetches path with a fresh connection and returns the status and body.
func (p *proc) get(t testing.TB, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hasBatch reports whether the server has the batch route: an unknown tag
// answers 404 with code tag_not_found there, and a plain 404 without it.
func hasBatch(t testing.TB, p *proc) bool {
	t.Helper()
	status, body := p.get(t, "/api/v1/segment/no-such-tag-probe?count=1")
	return status == http.StatusNotFound && strings.Contains(body, `"tag_not_found"`)
}

// skipWithoutBatch skips the test while the batch API is not in this tree.
func skipWithoutBatch(t *testing.T, p *proc) {
	t.Helper()
	if !hasBatch(t, p) {
		t.Skip("leaf-server has no batch route (GET /api/v1/segment/{tag}?count=N) yet")
	}
}

// createTag migrates the database of dsnStr and inserts a leaf_alloc row.
func createTag(t testing.TB, dsnStr, tag string, step int64) {
	t.Helper()
	st, err := dsn.Open(t.Context(), dsnStr, true)
	if err != nil {
		t.Fatalf("open %s: %v", dsn.Redact(dsnStr), err)
	}
	defer st.Close()
	if err := st.Create(t.Context(), store.Row{BizTag: tag, MaxID: 1, Step: step}); err != nil {
		t.Fatalf("create tag %q: %v", tag, err)
	}
}

// sqliteServer starts a server on its own SQLite file with the given tags
// (step each) and extra flags.
func sqliteServer(t testing.TB, tags map[string]int64, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	d := "sqlite:" + filepath.Join(dir, "leaf.db")
	for tag, step := range tags {
		createTag(t, d, tag, step)
	}
	return startServer(t, dir, append([]string{"--segment-dsn", d, "--demo-tag=false"}, args...)...)
}

// deadURL returns the URL of a loopback port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// recorder is an http.RoundTripper that counts requests by path (without
// the query) and the most that were ever in flight at once per path.
type recorder struct {
	tr *http.Transport

	mu          sync.Mutex // guards the maps below
	requests    map[string]int
	inFlight    map[string]int
	maxInFlight map[string]int
	hosts       map[string]int // requests per host:port
	failed      map[string]int // transport errors per host:port
}

func newRecorder(t testing.TB) *recorder {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 128
	t.Cleanup(tr.CloseIdleConnections)
	return &recorder{tr: tr, requests: map[string]int{}, inFlight: map[string]int{},
		maxInFlight: map[string]int{}, hosts: map[string]int{}, failed: map[string]int{}}
}

func (r *recorder) client() *http.Client { return &http.Client{Transport: r} }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	path := req.URL.EscapedPath()
	r.mu.Lock()
	r.requests[path]++
	r.hosts[req.URL.Host]++
	r.inFlight[path]++
	r.maxInFlight[path] = max(r.maxInFlight[path], r.inFlight[path])
	r.mu.Unlock()
	resp, err := r.tr.RoundTrip(req)
	r.mu.Lock()
	r.inFlight[path]--
	if err != nil {
		r.failed[req.URL.Host]++
	}
	r.mu.Unlock()
	return resp, err
}

// count returns the requests whose path starts with prefix.
func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for p, c := range r.requests {
		if strings.HasPrefix(p, prefix) {
			n += c
		}
	}
	return n
}

// paths returns a copy of the request counts by path.
func (r *recorder) paths() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]int, len(r.requests))
	for p, c := range r.requests {
		m[p] = c
	}
	return m
}

// hostCount returns the requests sent to host:port.
func (r *recorder) hostCount(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hosts[host]
}

// failures returns the transport errors of requests to host:port.
func (r *recorder) failures(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed[host]
}

// maxConcurrent returns the most requests ever in flight at once on path.
func (r *recorder) maxConcurrent(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxInFlight[path]
}
