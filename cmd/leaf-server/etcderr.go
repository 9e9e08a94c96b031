package main

import (
	"context"
	"errors"
	"fmt"
)

// etcdStartError says what a failed etcd claim at start means for the
// operator: when etcd gave no answer in time (the claim's own request
// deadline passed while the start itself had time left), "etcd at
// <endpoints> is not reachable" and what to check, instead of the bare
// "context deadline exceeded" (issue 23 item 5). startCtx is the context
// the claim ran under; any other error is returned as it is.
func etcdStartError(startCtx context.Context, endpoints string, err error) error {
	if err == nil || startCtx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("etcd at %s is not reachable (no answer in time): start etcd, or fix --etcd-endpoints "+
		"(and --etcd-cacert/--etcd-cert/--etcd-key for TLS): %w", endpoints, err)
}
