package zkworker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a Worker (its upload goroutine or ZooKeeper session) outlives
// Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
