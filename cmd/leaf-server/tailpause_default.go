//go:build !leaftest

package main

import "log/slog"

// tailPause returns nil: production builds do not pause between the two
// steps of a tail return. The leaftest build (tailpause_leaftest.go) can, for
// the fault tests that kill the process there.
func tailPause(*slog.Logger) func(tag string) { return nil }
