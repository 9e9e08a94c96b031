package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestEtcdDownAtStart: with nothing listening at --etcd-endpoints, the real
// binary exits 1 saying "etcd at <endpoints> is not reachable" and what to
// fix, not only "context deadline exceeded" (issue 23 item 5).
func TestEtcdDownAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the leaf-server binary")
	}
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--segment=false", "--worker-id-source", "etcd", "--etcd-endpoints", endpoint)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("leaf-server with etcd down: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"etcd at " + endpoint + " is not reachable", "fix --etcd-endpoints"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("leaf-server with etcd down says:\n%s\nwant %q", out, want)
		}
	}
}

// TestEtcdStartError: only a request deadline of the claim, while the start
// had time left, becomes "not reachable"; other errors pass unchanged.
func TestEtcdStartError(t *testing.T) {
	deadline := fmt.Errorf("etcdworker: list /x/workers/ at h:2379: %w", context.DeadlineExceeded)
	other := errors.New("etcdworker: no free worker ID")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		give    error
		wantNew bool
	}{
		{"nil", context.Background(), nil, false},
		{"request deadline", context.Background(), deadline, true},
		{"other error", context.Background(), other, false},
		{"start itself ended", done, deadline, false},
	}
	for _, tt := range tests {
		got := etcdStartError(tt.ctx, "h:2379", tt.give)
		switch {
		case tt.wantNew && (got == nil || !strings.Contains(got.Error(), "etcd at h:2379 is not reachable") || !errors.Is(got, context.DeadlineExceeded)):
			t.Errorf("%s: etcdStartError(%v) = %v, want \"etcd at h:2379 is not reachable\" wrapping it", tt.name, tt.give, got)
		case !tt.wantNew && got != tt.give:
			t.Errorf("%s: etcdStartError(%v) = %v, want it unchanged", tt.name, tt.give, got)
		}
	}
}
