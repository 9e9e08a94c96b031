package sqllease_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a Lease's renewal goroutine (or a store's
// connections) outlives Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
