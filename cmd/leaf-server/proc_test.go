package main

import (
	"context"
	"strconv"
	"testing"

	"github.com/leaf-go/leaf/internal/servertest"
)

// serverBin is the leaf-server binary built once by TestMain (with -race
// when the tests run with it).
var serverBin string

func TestMain(m *testing.M) { servertest.Run(m, &serverBin, nil) }

// proc is one real leaf-server process on a loopback port.
type proc struct {
	*servertest.Proc
}

// startServer runs leaf-server with args (plus --listen 127.0.0.1:0) in dir
// and waits for it to listen. It is killed when the test ends.
func startServer(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	return &proc{servertest.Start(t, serverBin, servertest.Options{Dir: dir, Args: args})}
}

func (p *proc) logs() string { return p.Logs() }

func (p *proc) kill9() { p.Kill9() }

// get fetches path and returns the status and body.
func (p *proc) get(ctx context.Context, path string) (int, string, error) {
	return p.Get(ctx, path)
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
