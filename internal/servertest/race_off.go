//go:build !race

package servertest

// Race is true when this test binary runs with the race detector.
const Race = false
