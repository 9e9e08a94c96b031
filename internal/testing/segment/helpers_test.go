package segment_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaf-go/leaf/internal/dbtest"
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
