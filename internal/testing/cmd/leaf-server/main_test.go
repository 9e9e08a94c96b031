// Package leafserver_test holds the tests of cmd/leaf-server that need a
// dependency the library module does not carry (the TCP fault proxy, a YAML
// parser). They run the real leaf-server binary, as the end-to-end tests in
// cmd/leaf-server do.
package leafserver_test

import (
	"context"
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

// get fetches path and returns the status and body.
func (p *proc) get(ctx context.Context, path string) (int, string, error) {
	return p.Get(ctx, path)
}

// openStore and maxID: see internal/servertest.
var (
	openStore = servertest.OpenStore
	maxID     = servertest.MaxID
)
