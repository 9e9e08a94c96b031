package segment_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // raw SQL on the MySQL test database
	_ "github.com/jackc/pgx/v5/stdlib" // raw SQL on the PostgreSQL test database
	"go.uber.org/goleak"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
	_ "github.com/leaf-go/leaf/store/sqlite" // registers the "sqlite" database/sql driver
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

// testDB is an opened store plus a second, raw connection to the same
// database for what the store does not offer (changing max_id, row locks).
type testDB struct {
	dsn string
	st  store.Store
	raw *sql.DB
}

func openDB(t testing.TB, dsnStr string) *testDB {
	t.Helper()
	ctx := context.Background()
	st, err := dsn.Open(ctx, dsnStr, true)
	if err != nil {
		t.Fatalf("dsn.Open(%s): %v", dsn.Redact(dsnStr), err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := dsn.Parse(dsnStr)
	if err != nil {
		t.Fatalf("dsn.Parse: %v", err)
	}
	driver, source := "", c.DSN
	switch c.Dialect {
	case dsn.SQLite:
		driver, source = "sqlite", c.DSN+"?_pragma=busy_timeout(5000)"
	case dsn.Postgres:
		driver = "pgx"
	case dsn.MySQL:
		driver = "mysql"
	}
	raw, err := sql.Open(driver, source)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", driver, err)
	}
	t.Cleanup(func() { raw.Close() })
	return &testDB{dsn: dsnStr, st: st, raw: raw}
}

// create inserts a leaf_alloc row through the store.
func (d *testDB) create(t testing.TB, tag string, maxID, step int64) {
	t.Helper()
	if err := d.st.Create(context.Background(), store.Row{BizTag: tag, MaxID: maxID, Step: step}); err != nil {
		t.Fatalf("Create(%q, %d, %d): %v", tag, maxID, step, err)
	}
}

// exec runs a raw statement; tests only build it from their own constants.
func (d *testDB) exec(t testing.TB, format string, args ...any) {
	t.Helper()
	q := fmt.Sprintf(format, args...)
	if _, err := d.raw.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("exec %q: %v", q, err)
	}
}

// maxID reads the row's max_id.
func (d *testDB) maxID(t testing.TB, tag string) int64 {
	t.Helper()
	var v int64
	q := fmt.Sprintf("SELECT max_id FROM leaf_alloc WHERE biz_tag = '%s'", tag)
	if err := d.raw.QueryRowContext(context.Background(), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// lockRow holds the row lock of tag from another transaction (BEGIN;
// SELECT … FOR UPDATE) until the returned func is called, so that an
// allocation blocks for real.
func (d *testDB) lockRow(t testing.TB, tag string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	var v int64
	q := fmt.Sprintf("SELECT max_id FROM leaf_alloc WHERE biz_tag = '%s' FOR UPDATE", tag)
	if err := tx.QueryRowContext(ctx, q).Scan(&v); err != nil {
		tx.Rollback()
		t.Fatalf("%s: %v", q, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { tx.Rollback() }) }
	t.Cleanup(release)
	return release
}

// newGen starts a Generator that is closed when the test ends.
func newGen(t testing.TB, st segment.Store, cfg segment.Config) *segment.Generator {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	g, err := segment.New(context.Background(), st, cfg)
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func mustGet(t testing.TB, g *segment.Generator, tag string) int64 {
	t.Helper()
	id, err := g.Get(context.Background(), tag)
	if err != nil {
		t.Fatalf("Get(%q) = %v, want an ID", tag, err)
	}
	return id
}

// statsOf returns the buffer stats of tag and whether the tag is cached.
func statsOf(g *segment.Generator, tag string) (segment.BufferStats, bool) {
	for _, s := range g.Stats() {
		if s.BizTag == tag {
			return s, true
		}
	}
	return segment.BufferStats{}, false
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitNextReady waits until the prefetched segment of tag is ready.
func waitNextReady(t testing.TB, g *segment.Generator, tag string) segment.BufferStats {
	t.Helper()
	var st segment.BufferStats
	waitFor(t, tag+" next segment", func() bool {
		st, _ = statsOf(g, tag)
		return st.NextReady
	})
	return st
}

// countingStore passes every call to a real store and counts them, so tests
// can see how often the generator went to the database.
type countingStore struct {
	segment.Store
	allocs atomic.Int64
	rows   atomic.Int64
	maxIDs atomic.Int64
}

func (c *countingStore) Allocate(ctx context.Context, tag string, step int64) (store.Allocation, error) {
	c.allocs.Add(1)
	return c.Store.Allocate(ctx, tag, step)
}

func (c *countingStore) Rows(ctx context.Context) ([]store.Row, error) {
	c.rows.Add(1)
	return c.Store.Rows(ctx)
}

func (c *countingStore) MaxID(ctx context.Context, tag string) (int64, error) {
	c.maxIDs.Add(1)
	return c.Store.MaxID(ctx, tag)
}

// loadCalls is the number of Allocate and MaxID calls: a load of a tag with
// a high-water mark calls MaxID, then Allocate if max_id is not below the
// mark; a load of a tag without one calls Allocate only.
func (c *countingStore) loadCalls() int64 { return c.allocs.Load() + c.maxIDs.Load() }

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
