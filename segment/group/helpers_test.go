package group_test

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

var (
	sqliteDB = dbKind{"sqlite", dbtest.SQLite}
	allDBs   = []dbKind{sqliteDB, {"postgres", dbtest.Postgres}, {"mysql", dbtest.MySQL}}
)

// The shared helpers live in internal/segtest; these names keep the tests
// short.
type testDB = segtest.DB

var (
	openDB = segtest.OpenDB
	newGen = segtest.NewGen
)
