package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql", for migrate
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for migrate

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
	_ "github.com/leaf-go/leaf/store/sqlite" // registers modernc's "sqlite" driver, for migrate
)

// openStore opens the leaf_alloc store named by s without migrating it. A
// SQLite file must exist already (a typo in the path must not create an
// empty database). Errors name the DSN with its password redacted.
func openStore(ctx context.Context, s string) (store.Store, error) {
	c, err := dsn.Parse(s)
	if err != nil {
		return nil, usagef("--dsn %s: %w", dsn.Redact(s), err)
	}
	if c.Dialect == dsn.SQLite {
		if err := sqliteExists(c.DSN); err != nil {
			return nil, err
		}
	}
	st, err := dsn.Open(ctx, s, false)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dsn.Redact(s), err)
	}
	return st, nil
}

// sqliteExists refuses a SQLite database file that does not exist, with the
// command that creates it.
func sqliteExists(path string) error {
	if path == ":memory:" {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sqlite database %s does not exist (create it with: leafctl migrate up --dsn sqlite:%s)", path, path)
	}
	return nil
}

// openSQL opens a database/sql handle on the database named by s for the
// migrations, checks that it answers and returns it with its dialect.
// create allows a missing SQLite file (and its directory) to be created.
func openSQL(ctx context.Context, s string, create bool) (*sql.DB, string, error) {
	c, err := dsn.Parse(s)
	if err != nil {
		return nil, "", usagef("--dsn %s: %w", dsn.Redact(s), err)
	}
	var db *sql.DB
	switch c.Dialect {
	case dsn.SQLite:
		if !create {
			if err := sqliteExists(c.DSN); err != nil {
				return nil, "", err
			}
		} else if c.DSN != ":memory:" {
			if err := os.MkdirAll(filepath.Dir(c.DSN), 0o750); err != nil {
				return nil, "", fmt.Errorf("open %s: %w", s, err)
			}
		}
		// The same busy timeout as store/sqlite, so that leafctl waits for a
		// running server's write instead of failing at once.
		db, err = sql.Open("sqlite", c.DSN+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
		if err == nil {
			db.SetMaxOpenConns(1)
		}
	case dsn.Postgres:
		db, err = sql.Open("pgx", c.DSN)
	default:
		db, err = sql.Open("mysql", c.DSN) // dsn.Parse set parseTime=true
	}
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", dsn.Redact(s), err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("open %s: %w", dsn.Redact(s), err)
	}
	return db, c.Dialect, nil
}

// storeHint adds what to do to a store error that is not one of the store's
// own refusals: the usual cause on a new database is a missing table.
func storeHint(err error) error {
	var ue *usageError
	switch {
	case err == nil,
		errors.As(err, &ue),
		errors.Is(err, errNotConfirmed),
		errors.Is(err, store.ErrTagNotFound),
		errors.Is(err, store.ErrTagExists),
		errors.Is(err, store.ErrBelowTombstone),
		errors.Is(err, store.ErrBadStep),
		errors.Is(err, store.ErrBadRow),
		errors.Is(err, store.ErrOverflow),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("%w (if leaf_alloc does not exist yet, run: leafctl migrate up)", err)
}
