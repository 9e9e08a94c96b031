// Package sqlite is the leaf_alloc store on an embedded SQLite database
// (modernc.org/sqlite: pure Go, no cgo), leaf-go's zero-setup default.
//
// All work goes through one connection, so the process has a single writer
// and allocations are serialised in the process; other processes on the same
// file (leafctl, a second server) are serialised by SQLite's file lock, with
// BEGIN IMMEDIATE transactions and a busy timeout of BusyTimeout. The
// database runs in WAL mode with synchronous=FULL: an allocation is on disk
// before it is handed out, so a power cut cannot make the service repeat IDs.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaf-go/leaf/migrations"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/internal/sqlstore"
)

// BusyTimeout is how long a statement waits for another process's write lock
// on the database file before failing with SQLITE_BUSY.
const BusyTimeout = 5 * time.Second

// Memory is the path of a private in-memory database. It lives as long as the
// Store's single connection; use it in tests only.
const Memory = ":memory:"

// now is the SQL expression for update_time: UTC with milliseconds, the
// format the migration's DEFAULT uses.
const now = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// timeLayout parses update_time when the driver hands it over as text.
const timeLayout = "2006-01-02 15:04:05.999999999"

// Store is a leaf_alloc store on one SQLite file. It is safe for concurrent
// use.
type Store struct {
	db *sql.DB
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it and its parent directory if needed) the SQLite
// database at path and, when migrate is true, applies the embedded migrations.
// path is a file path, optionally prefixed with "sqlite:", or Memory; it must
// not contain '?' (the driver would read it as parameters). Errors: a bad
// path, the directory or file cannot be created, or a migration failed.
func Open(ctx context.Context, path string, migrate bool) (*Store, error) {
	path = strings.TrimPrefix(path, "sqlite:")
	if path == "" {
		return nil, errors.New("sqlite: empty path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: path %q must not contain '?' or '#'", path)
	}
	if path != Memory {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("sqlite: %w", err)
			}
		}
	}
	q := fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate",
		BusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", path+q)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// One connection: a single writer in the process, and a :memory:
	// database that is the same database for every statement.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &Store{db: db}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	if migrate {
		if err := migrations.Up(ctx, db, "sqlite"); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// allocateAttempts bounds the retries when the guarded UPDATE matched no row
// but the row read back admits the allocation (it changed in between).
const allocateAttempts = 3

// Allocate implements [store.Store] with one UPDATE … RETURNING statement,
// guarded so that a refused allocation leaves the row unchanged (max_id >=
// mark included: the one connection writes under BEGIN IMMEDIATE's lock).
func (s *Store) Allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, error) {
	query := `UPDATE leaf_alloc SET max_id = max_id + step, update_time = ` + now + `
		WHERE biz_tag = ?1 AND step > 0 AND max_id <= 9223372036854775807 - max(step, 0)
			AND max_id >= ?2
		RETURNING max_id, step`
	args := []any{tag, store.GuardMark(mark)}
	if step > 0 {
		query = `UPDATE leaf_alloc SET max_id = max_id + ?3, update_time = ` + now + `
			WHERE biz_tag = ?1 AND step > 0 AND max_id <= 9223372036854775807 - ?3
				AND max_id >= ?2
			RETURNING max_id, step`
		args = append(args, step)
	}
	for range allocateAttempts {
		var a store.Allocation
		err := s.db.QueryRowContext(ctx, query, args...).Scan(&a.MaxID, &a.DBStep)
		if err == nil {
			a.BizTag, a.Step = tag, step
			if step <= 0 {
				a.Step = a.DBStep
			}
			return a, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return store.Allocation{}, fmt.Errorf("allocate %q: %w", tag, err)
		}
		var maxID, rowStep int64
		err = s.db.QueryRowContext(ctx, `SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?`, tag).Scan(&maxID, &rowStep)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return store.Allocation{}, fmt.Errorf("allocate %q: %w", tag, err)
		}
		if err := store.Refusal(tag, err == nil, maxID, rowStep, step, mark); err != nil {
			return store.Allocation{}, err
		}
	}
	return store.Allocation{}, fmt.Errorf("allocate %q: row changed during %d attempts", tag, allocateAttempts)
}

// Tags implements [store.Store], ordered by biz_tag.
func (s *Store) Tags(ctx context.Context) ([]string, error) { return sqlstore.Tags(ctx, s.db) }

// Rows implements [store.Store].
func (s *Store) Rows(ctx context.Context) ([]store.Row, error) {
	return sqlstore.OrderedRows(ctx, s.db, rowsQuery, scanRow)
}

// rowsQuery reads every leaf_alloc row with its ordered flag (a row in
// leaf_ordered, migration 6).
const rowsQuery = `SELECT a.biz_tag, a.max_id, a.step, a.description, a.update_time, o.biz_tag IS NOT NULL
	FROM leaf_alloc a LEFT JOIN leaf_ordered o ON o.biz_tag = a.biz_tag
	ORDER BY a.biz_tag`

// Create implements [store.Store]: the row goes in, and the tag's
// tombstone is taken out, in one transaction; a row below the tombstone is
// refused and the transaction rolled back. The tag's leaf_ordered row
// (migration 6) is made to agree with r.Ordered in the same transaction: a
// stale row (left by a plain SQL delete of the tag) is removed first, so that
// a tag created plain is never served as ordered. An empty description is
// stored as NULL, as Leaf's default.
func (s *Store) Create(ctx context.Context, r store.Row) error {
	_, err := s.create(ctx, r, false)
	return err
}

// ForceCreate implements [store.Store].
func (s *Store) ForceCreate(ctx context.Context, r store.Row) (int64, error) {
	return s.create(ctx, r, true)
}

// create is Create, or ForceCreate when force is true.
func (s *Store) create(ctx context.Context, r store.Row, force bool) (overrode int64, err error) {
	if err := store.ValidateRow(r); err != nil {
		return 0, fmt.Errorf("create %q: %w", r.BizTag, err)
	}
	r.MaxID = max(r.MaxID, 1)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES (?, ?, ?, ?, `+now+`)`,
			r.BizTag, r.MaxID, r.Step, sqlstore.NullString(r.Description)); err != nil {
			var se *sqlite.Error
			if errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE) {
				return store.ErrTagExists
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = ?`, r.BizTag); err != nil {
			return err
		}
		if r.Ordered {
			if _, err := tx.ExecContext(ctx, `INSERT INTO leaf_ordered (biz_tag) VALUES (?)`, r.BizTag); err != nil {
				return err
			}
		}
		var (
			tomb int64
			at   string
		)
		err := tx.QueryRowContext(ctx, `DELETE FROM leaf_tombstone WHERE biz_tag = ? RETURNING max_id, deleted_at`, r.BizTag).Scan(&tomb, &at)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		case r.MaxID >= tomb:
			return nil
		case !force:
			deleted, _ := time.Parse(timeLayout, at) // written by this store or the column's default
			return &store.TombstoneError{BizTag: r.BizTag, MaxID: r.MaxID, Tombstone: tomb, DeletedAt: deleted}
		}
		// Forced below the tombstone: it stays, so that no server gives a
		// tail of the deleted row back into this one (ReturnTail).
		overrode = tomb
		_, err = tx.ExecContext(ctx, `INSERT INTO leaf_tombstone (biz_tag, max_id, deleted_at) VALUES (?, ?, ?)`, r.BizTag, tomb, at)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("create %q: %w", r.BizTag, err)
	}
	return overrode, nil
}

// inTx runs fn in one transaction (BEGIN IMMEDIATE: the DSN's _txlock),
// committed when fn returns nil and rolled back otherwise.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Update sets the step (in IDs, 1..store.MaxStep) and the description of an
// existing row; max_id is never touched. Errors: [store.ErrBadStep],
// [store.ErrTagNotFound].
func (s *Store) Update(ctx context.Context, tag string, step int64, description string) error {
	if err := store.ValidateRow(store.Row{BizTag: tag, Step: step, Description: description}); err != nil {
		return fmt.Errorf("update %q: %w", tag, err)
	}
	res, err := s.db.ExecContext(ctx,
		`UPDATE leaf_alloc SET step = ?, description = ?, update_time = `+now+` WHERE biz_tag = ?`,
		step, sqlstore.NullString(description), tag)
	return sqlstore.Affected("update", tag, res, err)
}

// Delete implements [store.Store]: the row and its leaf_ordered row go out
// and its max_id into the tag's tombstone in one transaction.
func (s *Store) Delete(ctx context.Context, tag string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var maxID int64
		err := tx.QueryRowContext(ctx, `DELETE FROM leaf_alloc WHERE biz_tag = ? RETURNING max_id`, tag).Scan(&maxID)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrTagNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = ?`, tag); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO leaf_tombstone (biz_tag, max_id, deleted_at) VALUES (?1, ?2, `+now+`)
			ON CONFLICT (biz_tag) DO UPDATE SET max_id = max(max_id, ?2), deleted_at = `+now, tag, maxID)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete %q: %w", tag, err)
	}
	return nil
}

// Fence raises the row's max_id to at least minMaxID and never lowers it, so
// that the next segment starts at or above minMaxID (`leafctl tag fence`,
// after a restore or failover took the database back in time). It returns the
// row afterwards; update_time changes only when max_id was raised. Errors:
// [store.ErrTagNotFound].
func (s *Store) Fence(ctx context.Context, tag string, minMaxID int64) (store.Row, error) {
	if err := store.ValidateMaxID(minMaxID); err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx,
		`UPDATE leaf_alloc SET max_id = ?1, update_time = `+now+` WHERE biz_tag = ?2 AND max_id < ?1`,
		minMaxID, tag); err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	r, err := scanRow(tx.QueryRowContext(ctx,
		`SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?`, tag))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, store.ErrTagNotFound)
	}
	if err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	if err := tx.Commit(); err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	return r, nil
}

// ReturnTail implements [store.Store].
func (s *Store) ReturnTail(ctx context.Context, tag string, from, to, seq int64) (bool, error) {
	if err := store.ValidateTailReturn(from, to, seq); err != nil {
		return false, fmt.Errorf("return tail of %q: %w", tag, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("return tail of %q: %w", tag, err)
	}
	defer tx.Rollback()
	ok, err := sqlstore.ReturnTail(ctx, tx, now, tag, from, to, seq)
	if err != nil || !ok {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("return tail of %q: %w", tag, err)
	}
	return true, nil
}

// TailReturns implements [store.Store].
func (s *Store) TailReturns(ctx context.Context) ([]store.TailReturn, error) {
	return sqlstore.TailReturns(ctx, s.db)
}

// TailReturnOf implements [store.Store].
func (s *Store) TailReturnOf(ctx context.Context, tag string) (store.TailReturn, error) {
	return sqlstore.TailReturnOf(ctx, s.db, tag)
}

// Ping implements [store.Store].
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close implements [store.Store]. A Memory database is gone afterwards.
func (s *Store) Close() error { return s.db.Close() }

// scanRow reads the sqlstore.RowColumns of one row.
func scanRow(sc sqlstore.Scanner) (store.Row, error) {
	var (
		r    store.Row
		desc sql.NullString
		ut   any
	)
	if err := sc.Scan(&r.BizTag, &r.MaxID, &r.Step, &desc, &ut); err != nil {
		return store.Row{}, err
	}
	r.Description = desc.String
	switch v := ut.(type) {
	case time.Time:
		r.UpdateTime = v.UTC()
	case string:
		t, err := time.Parse(timeLayout, v)
		if err != nil {
			return store.Row{}, fmt.Errorf("update_time %q: %w", v, err)
		}
		r.UpdateTime = t
	}
	return r, nil
}

// MaxID reads the max_id of tag without changing it (segment's restore
// check before an allocation). Errors: [store.ErrTagNotFound].
func (s *Store) MaxID(ctx context.Context, tag string) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `SELECT max_id FROM leaf_alloc WHERE biz_tag = ?`, tag).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("max_id %q: %w", tag, store.ErrTagNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("max_id %q: %w", tag, err)
	}
	return v, nil
}
