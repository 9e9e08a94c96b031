// Package waittest waits on conditions in tests instead of sleeping: [For] until a
// condition holds, with a deadline, and [Quiet] through a window in which a condition must
// stay false, for the few checks that only time can decide. It is imported only from tests,
// in both modules.
package waittest

import (
	"testing"
	"time"
)

// For polls cond until it holds and fails the test with what once limit has passed. It looks
// every millisecond at first and backs off to every 20 ms, so that a long wait on a loaded
// machine costs little CPU while a short one ends within a millisecond or two.
func For(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(pause)
	}
}

// Quiet polls happened every 5 ms throughout window, and once more after it, and reports
// whether it stayed false. The moment it reports true, Quiet marks the test failed with what
// (t.Errorf: the caller may still report what else it saw) and returns false.
//
// Use it only where time is the only witness: where the event that must not happen has an
// observable point after which it would have happened already (a later event ordered after
// it, a count of attempts, an injected clock), wait for that point with [For] and check
// once instead. The caller says in a comment why no such point exists.
func Quiet(t testing.TB, window time.Duration, what string, happened func() bool) bool {
	t.Helper()
	end := time.Now().Add(window)
	for {
		last := !time.Now().Before(end)
		if happened() {
			t.Errorf("%s (within a %v window that had to stay quiet)", what, window)
			return false
		}
		if last {
			return true
		}
		time.Sleep(min(5*time.Millisecond, time.Until(end)))
	}
}
