// Package segtest holds the test helpers shared by the segment tests of the root module
// (segment/*_test.go) and of the test module (internal/testing/segment): an opened store with
// a raw connection beside it, a generator closed with the test, a counting store and a store that stalls.
// It is imported only from tests.
package segtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // raw SQL on the MySQL test database
	_ "github.com/jackc/pgx/v5/stdlib" // raw SQL on the PostgreSQL test database

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
	_ "github.com/leaf-go/leaf/store/sqlite" // registers the "sqlite" database/sql driver
)

// DB is an opened store plus a second, raw connection to the same database for what the
// store does not offer (changing max_id, row locks).
type DB struct {
	DSN   string      // the DSN the store was opened with
	Store store.Store // the store, migrated
	Raw   *sql.DB     // a raw connection to the same database
}

// OpenDB opens dsnStr as a store (migrations applied) and a raw connection beside it; both
// are closed when the test ends. It fails the test on any error.
func OpenDB(t testing.TB, dsnStr string) *DB {
	t.Helper()
	ctx := context.Background()
	st, err := dsn.Open(ctx, dsnStr, true)
	if err != nil {
		t.Fatalf("dsn.Open(%s): %v", dsn.Redact(dsnStr), err)
	}
	t.Cleanup(func() { _ = st.Close() }) // the test is over; a close error changes nothing
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
	return &DB{DSN: dsnStr, Store: st, Raw: raw}
}

// Create inserts a leaf_alloc row through the store.
func (d *DB) Create(t testing.TB, tag string, maxID, step int64) {
	t.Helper()
	if err := d.Store.Create(context.Background(), store.Row{BizTag: tag, MaxID: maxID, Step: step}); err != nil {
		t.Fatalf("Create(%q, %d, %d): %v", tag, maxID, step, err)
	}
}

// Exec runs a raw statement; tests only build it from their own constants.
func (d *DB) Exec(t testing.TB, format string, args ...any) {
	t.Helper()
	q := fmt.Sprintf(format, args...)
	if _, err := d.Raw.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("exec %q: %v", q, err)
	}
}

// MaxID reads the row's max_id over the raw connection.
func (d *DB) MaxID(t testing.TB, tag string) int64 {
	t.Helper()
	var v int64
	q := fmt.Sprintf("SELECT max_id FROM leaf_alloc WHERE biz_tag = '%s'", tag)
	if err := d.Raw.QueryRowContext(context.Background(), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// LockRow holds the row lock of tag from another transaction (BEGIN; SELECT … FOR UPDATE)
// until the returned func is called (or the test ends), so that an allocation blocks for real.
func (d *DB) LockRow(t testing.TB, tag string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Raw.BeginTx(ctx, nil)
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

// NewGen starts a Generator that is closed when the test ends; a nil cfg.Logger logs to the
// test's output.
func NewGen(t testing.TB, st segment.Store, cfg segment.Config) *segment.Generator {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	g, err := segment.New(context.Background(), st, cfg)
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { _ = g.Close() }) // Close always returns nil
	return g
}

// MustGet returns the next ID of tag and fails the test on an error.
func MustGet(t testing.TB, g *segment.Generator, tag string) int64 {
	t.Helper()
	id, err := g.Get(context.Background(), tag)
	if err != nil {
		t.Fatalf("Get(%q) = %v, want an ID", tag, err)
	}
	return id
}

// StatsOf returns the buffer stats of tag and whether the tag is cached.
func StatsOf(g *segment.Generator, tag string) (segment.BufferStats, bool) {
	for _, s := range g.Stats() {
		if s.BizTag == tag {
			return s, true
		}
	}
	return segment.BufferStats{}, false
}

// WaitNextReady waits until the prefetched segment of tag is ready and returns its stats.
func WaitNextReady(t testing.TB, g *segment.Generator, tag string) segment.BufferStats {
	t.Helper()
	var st segment.BufferStats
	waittest.For(t, 10*time.Second, tag+" next segment", func() bool {
		st, _ = StatsOf(g, tag)
		return st.NextReady
	})
	return st
}

// CountingStore passes every call to a real store and counts them, so tests can see how
// often the generator went to the database.
type CountingStore struct {
	segment.Store
	Allocs    atomic.Int64 // Allocate calls
	RowsCalls atomic.Int64 // Rows calls
	FindCalls atomic.Int64 // FindTags calls (miss lookup rounds)
	FindNames atomic.Int64 // names asked by FindTags calls
	MaxIDs    atomic.Int64 // MaxID calls
}

// Allocate counts the call and passes it on.
func (c *CountingStore) Allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, error) {
	c.Allocs.Add(1)
	return c.Store.Allocate(ctx, tag, step, mark)
}

// Rows counts the call and passes it on.
func (c *CountingStore) Rows(ctx context.Context) ([]store.Row, error) {
	c.RowsCalls.Add(1)
	return c.Store.Rows(ctx)
}

// FindTags counts the call and its names and passes it on.
func (c *CountingStore) FindTags(ctx context.Context, tags []string) (map[string]bool, error) {
	c.FindCalls.Add(1)
	c.FindNames.Add(int64(len(tags)))
	return c.Store.FindTags(ctx, tags)
}

// MaxID counts the call and passes it on.
func (c *CountingStore) MaxID(ctx context.Context, tag string) (int64, error) {
	c.MaxIDs.Add(1)
	return c.Store.MaxID(ctx, tag)
}

// LoadCalls is the number of Allocate and MaxID calls: a load calls Allocate (the store
// checks the high-water mark in the same statement), and MaxID only after an allocation
// refused below the mark, to match it with another server's tail return.
func (c *CountingStore) LoadCalls() int64 { return c.Allocs.Load() + c.MaxIDs.Load() }

// ViaProxy returns dsnStr with its host:port replaced by proxy(host:port).
func ViaProxy(t testing.TB, dsnStr string, proxy func(upstream string) string) string {
	t.Helper()
	u, err := url.Parse(dsnStr)
	if err != nil || u.Host == "" {
		t.Fatalf("cannot route %s through a proxy", dsn.Redact(dsnStr))
	}
	u.Host = proxy(u.Host)
	return u.String()
}

// StallRows is a real store whose Rows and Groups, while Stall is set, block until their
// context ends (a database connection black-holed by a partition), saying so on stalled
// first. Make one with [NewStallRows].
type StallRows struct {
	store.Store
	// Stall makes Rows and Groups block.
	Stall   atomic.Bool
	stalled chan struct{}
}

// NewStallRows returns st wrapped, not stalling yet.
func NewStallRows(st store.Store) *StallRows {
	return &StallRows{Store: st, stalled: make(chan struct{}, 1)}
}

func (s *StallRows) block(ctx context.Context) error {
	s.stalled <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

// Rows is the store's, or blocks until ctx ends while Stall is set.
func (s *StallRows) Rows(ctx context.Context) ([]store.Row, error) {
	if s.Stall.Load() {
		return nil, s.block(ctx)
	}
	return s.Store.Rows(ctx)
}

// Groups is the store's, or blocks until ctx ends while Stall is set.
func (s *StallRows) Groups(ctx context.Context) ([]store.Group, error) {
	if s.Stall.Load() {
		return nil, s.block(ctx)
	}
	return s.Store.Groups(ctx)
}

// WaitTurn runs call with a context that ends after 50 ms while another call holds the
// turn, stalled on st, and fails unless call gives up with its context, waiting for "the
// one under way" (a call that waited on a mutex until the stalled call ended would wait
// here forever: the test's 30 s liveness limit ends it). Then it checks that the turn is
// free again once the stalled call's context ends.
func WaitTurn(t *testing.T, st *StallRows, call func(context.Context) error) {
	t.Helper()
	holder, release := context.WithCancel(context.Background())
	defer release()
	first := make(chan error, 1)
	st.Stall.Store(true)
	go func() { first <- call(holder) }()
	<-st.stalled // the first call holds the turn, inside the store
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- call(ctx) }()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "under way") {
			t.Errorf("call while another is stalled = %v, want its context's deadline, waiting for the one under way", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a call waited for the turn held by a stalled call past its own context's deadline")
	}
	select {
	case err := <-first:
		t.Fatalf("the stalled call returned %v before its context ended", err)
	default:
	}
	release()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("stalled call after its context ended = %v, want context.Canceled", err)
	}
	st.Stall.Store(false)
	if err := call(context.Background()); err != nil {
		t.Fatalf("call after the stalled one gave up = %v, want nil (the turn is free again)", err)
	}
}
