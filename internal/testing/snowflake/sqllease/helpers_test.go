package sqllease_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/sqllease"
)

// The helpers below are copies of those in snowflake/sqllease/main_test.go
// and snowflake/sqllease/sqllease_test.go that the tests of this package use;
// keep them in step.

// TestMain fails the package if a Lease's renewal goroutine (or a store's
// connections) outlives Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func start(t *testing.T, st sqllease.Store, opts sqllease.Options) *sqllease.Lease {
	t.Helper()
	l, err := sqllease.Claim(context.Background(), st, opts)
	if err != nil {
		t.Fatalf("Start(%+v) = %v", opts, err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func generator(t *testing.T, l *sqllease.Lease, layout snowflake.Layout) *snowflake.Generator {
	t.Helper()
	g, err := snowflake.New(context.Background(), snowflake.Settings{
		Layout: layout, WorkerID: l.WorkerID(), Lease: l, HighWater: l, HighWaterWindow: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("snowflake.New() = %v", err)
	}
	return g
}

func with(o sqllease.Options, owner string) sqllease.Options {
	o.Owner = owner
	return o
}
