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

var (
	sqliteDB   = dbKind{"sqlite", dbtest.SQLite}
	postgresDB = dbKind{"postgres", dbtest.Postgres}
	mysqlDB    = dbKind{"mysql", dbtest.MySQL}
	allDBs     = []dbKind{sqliteDB, postgresDB, mysqlDB}
)

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
	waitNextReady = segtest.WaitNextReady
)

// checkUnique fails the test unless the IDs collected per goroutine are
// want distinct IDs, all in [1, maxID).
func checkUnique(t testing.TB, ids [][]int64, maxID int64, want int) {
	t.Helper()
	seen := make(map[int64]bool, want)
	for _, list := range ids {
		for _, id := range list {
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			if id < 1 || id >= maxID {
				t.Fatalf("ID %d outside [1, max_id %d)", id, maxID)
			}
			seen[id] = true
		}
	}
	if len(seen) != want {
		t.Fatalf("got %d IDs, want %d", len(seen), want)
	}
}
