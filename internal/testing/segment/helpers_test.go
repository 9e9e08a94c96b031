package segment_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/segtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// dbKind names a real database server and makes a fresh private database on
// it for one test.
type dbKind struct {
	name string
	dsn  func(testing.TB) string
}

var postgresDB = dbKind{"postgres", dbtest.Postgres}

// The shared helpers live in internal/segtest (the test module's segment
// tests use them too); these names keep the tests short.
type (
	testDB        = segtest.DB
	countingStore = segtest.CountingStore
)

var (
	openDB        = segtest.OpenDB
	newGen        = segtest.NewGen
	mustGet       = segtest.MustGet
	statsOf       = segtest.StatsOf
	waitFor       = segtest.WaitFor
	waitNextReady = segtest.WaitNextReady
)

var viaProxy = segtest.ViaProxy
