// Package migrations holds the leaf_alloc schema as goose v3 SQL migrations,
// one folder per dialect, embedded in the binary, and applies them.
//
// The MySQL table is byte-for-byte Meituan Leaf 1.0.1's leaf_alloc, created
// with CREATE TABLE IF NOT EXISTS, so pointing leaf-go at an existing Leaf
// database adopts the table and its rows unchanged. PostgreSQL and SQLite get
// the closest equivalent; having no ON UPDATE CURRENT_TIMESTAMP, their stores
// set update_time in every UPDATE.
//
// Version 2 adds leaf_worker_lease, the table of the `sql` snowflake worker ID
// source (store.LeaseStore, snowflake/sqllease): one row per worker ID with
// its owner, generation (fencing token), expiry and time high-water mark.
// Version 3 adds leaf_group, the declarations of date-grouped tags
// (store.Store's group methods, segment/group's Groups; docs/contract.md §10). Version 4 adds
// leaf_worker_lease.reported_ms, the holder's own clock at its last write
// (the peer clock check at start). Version 5 adds
// leaf_tombstone, the last max_id of every tag deleted through leaf-go
// (store.Store's Delete, Create and ForceCreate; docs/contract.md §2.6 rule
// 8). Version 6 adds leaf_ordered, one row per ordered tag
// (store.Row.Ordered; docs/contract.md §12): its IDs are allocated per batch
// of requests, in real-time order across servers; leaf_alloc itself is
// unchanged. Version 7 adds leaf_tail_return, the record of the unused tail
// a server gave back on a graceful stop (store.Store's ReturnTail;
// docs/contract.md §2.6 rule 9).
//
// Down migrations are deliberately no-ops: leaf_alloc holds the high-water
// mark of every ID sequence, and losing it would make the service hand out IDs
// a second time. Goose's version bookkeeping lives in its own table,
// leaf_goose_db_version, so that it cannot collide with another application's
// goose migrations in the same database.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// VersionTable is the table goose records applied versions in.
const VersionTable = "leaf_goose_db_version"

// mysqlLockName is the GET_LOCK name that serialises concurrent Up calls on
// MySQL/MariaDB (for example several leaf-server instances starting at once).
const mysqlLockName = "leaf-go:migrations"

// mysqlLockWait is how long Up waits for another instance's migration on
// MySQL/MariaDB before giving up.
const mysqlLockWait = 60 * time.Second

//go:embed postgres/*.sql mysql/*.sql sqlite/*.sql
var files embed.FS

// ErrDialect is returned by Up and Status for a dialect other than
// "postgres", "mysql" or "sqlite".
var ErrDialect = errors.New("migrations: unknown dialect")

// Version is the state of one migration, as `leafctl migrate status` shows it.
type Version struct {
	// Version is the migration's number, from its file name (00001_… is 1).
	Version int64
	// Name is the migration's file name, e.g. "00001_leaf_alloc.sql".
	Name string
	// Applied reports whether the database has recorded the migration.
	Applied bool
	// AppliedAt is when it was applied (zero when pending), as the database
	// recorded it.
	AppliedAt time.Time
}

// sqliteUp serialises Up on SQLite within this process.
var sqliteUp sync.Mutex

// Up applies every pending migration of dialect ("postgres", "mysql" or
// "sqlite"; "sqlite3" and "postgresql" are accepted too) to db. Applying it to
// an up-to-date database is a no-op. Concurrent callers are serialised by an
// advisory lock on PostgreSQL (pg_advisory_lock) and by GET_LOCK on MySQL;
// on SQLite by a mutex within the process (other processes wait on the file
// lock). db is not closed.
// Errors: ErrDialect, or the driver's error wrapped with the migration.
func Up(ctx context.Context, db *sql.DB, dialect string) error {
	_, err := Apply(ctx, db, dialect)
	return err
}

// Apply is Up that also returns how many migrations it applied (0 when db
// was up to date), for tools that report it.
func Apply(ctx context.Context, db *sql.DB, dialect string) (applied int, err error) {
	p, err := newProvider(db, dialect)
	if err != nil {
		return 0, err
	}
	switch d, _ := normalise(dialect); d {
	case "mysql":
		unlock, err := mysqlLock(ctx, db)
		if err != nil {
			return 0, err
		}
		defer unlock()
	case "sqlite":
		// SQLite has no advisory lock; concurrent Ups in one process take
		// turns (other processes wait on the file lock, busy_timeout).
		sqliteUp.Lock()
		defer sqliteUp.Unlock()
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate %s up: %w", dialect, err)
	}
	return len(results), nil
}

// Status returns every embedded migration of dialect in version order and
// whether db has applied it. It creates goose's version table if missing but
// changes nothing else. On MySQL, db must have been opened with
// parseTime=true (store/dsn adds it) to read the applied times. Errors:
// ErrDialect, or the driver's error.
func Status(ctx context.Context, db *sql.DB, dialect string) ([]Version, error) {
	p, err := newProvider(db, dialect)
	if err != nil {
		return nil, err
	}
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate %s status: %w", dialect, err)
	}
	out := make([]Version, 0, len(st))
	for _, s := range st {
		v := Version{Applied: s.State == goose.StateApplied, AppliedAt: s.AppliedAt}
		if s.Source != nil {
			v.Version = s.Source.Version
			v.Name = path.Base(s.Source.Path)
		}
		out = append(out, v)
	}
	return out, nil
}

// newProvider builds a goose provider for dialect over db. The provider must
// never be closed: Close would close the caller's shared *sql.DB.
func newProvider(db *sql.DB, dialect string) (*goose.Provider, error) {
	d, gd := normalise(dialect)
	if d == "" {
		return nil, fmt.Errorf("%w %q (want postgres, mysql or sqlite)", ErrDialect, dialect)
	}
	sub, err := fs.Sub(files, d)
	if err != nil {
		return nil, fmt.Errorf("migrations for %s: %w", d, err)
	}
	opts := []goose.ProviderOption{
		goose.WithTableName(VersionTable),
		goose.WithDisableGlobalRegistry(true),
	}
	if d == "postgres" {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("migrations lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gd, db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations for %s: %w", d, err)
	}
	return p, nil
}

// normalise maps a dialect name to the folder name and goose's dialect; ""
// when unknown.
func normalise(dialect string) (string, goose.Dialect) {
	switch dialect {
	case "postgres", "postgresql", "pgx":
		return "postgres", goose.DialectPostgres
	case "mysql", "mariadb":
		return "mysql", goose.DialectMySQL
	case "sqlite", "sqlite3":
		return "sqlite", goose.DialectSQLite3
	}
	return "", ""
}

// mysqlLock takes a named lock on a dedicated connection and returns the
// function that releases it. GET_LOCK belongs to the session, so holding it on
// one connection while goose migrates on others excludes other processes.
func mysqlLock(ctx context.Context, db *sql.DB) (func(), error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations lock: %w", err)
	}
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", mysqlLockName, int(mysqlLockWait/time.Second)).Scan(&got)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("migrations lock: %w", err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, fmt.Errorf("migrations lock: %q still held by another instance after %v", mysqlLockName, mysqlLockWait)
	}
	return func() {
		// Closing the session would release the lock too; release it
		// explicitly so that a pooled connection never keeps it. It fails
		// only on a broken session, which database/sql discards instead of
		// pooling, and the server releases a lock when its session ends.
		_, _ = conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", mysqlLockName)
		conn.Close()
	}, nil
}
