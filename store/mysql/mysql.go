// Package mysql is the leaf_alloc store on MySQL or MariaDB, through
// database/sql and go-sql-driver/mysql. An allocation is, as in Leaf's
// IDAllocDaoImpl, an UPDATE and then a SELECT of the row in one transaction;
// InnoDB's row lock serialises concurrent servers, which get disjoint
// segments. The table is Leaf's own, so an existing Leaf database works
// unchanged.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/migrations"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/internal/sqlstore"
)

// erDupEntry is MySQL's error number for a duplicate key (ER_DUP_ENTRY).
const erDupEntry = 1062

// Error numbers of a connection refused for good ([store.ErrPermanent]).
var permanentErrors = map[uint16]bool{
	1044: true, // ER_DBACCESS_DENIED_ERROR: the user may not use the database
	1045: true, // ER_ACCESS_DENIED_ERROR: wrong user or password
	1049: true, // ER_BAD_DB_ERROR: unknown database
	1698: true, // ER_ACCESS_DENIED_NO_PASSWORD_ERROR: MariaDB's answer for an unknown user
}

// permanent wraps err with [store.ErrPermanent] when the server refused the
// connection for good.
func permanent(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && permanentErrors[me.Number] {
		return fmt.Errorf("%w: %w", store.ErrPermanent, err)
	}
	return err
}

// multiHostDialTimeout is the connect timeout per host of a multi-host DSN
// that sets none (go-sql-driver's timeout parameter).
const multiHostDialTimeout = 3 * time.Second

// connMaxLifetime recycles connections before a server or proxy idle timeout
// (wait_timeout, often 8 h; load balancers less) closes them under us.
const connMaxLifetime = 3 * time.Minute

// Store is a leaf_alloc store on one MySQL/MariaDB database. It is safe for
// concurrent use.
type Store struct {
	db *sql.DB
	// multiHost records whether the DSN names several hosts (a lost
	// connection is then retried on the next one).
	multiHost bool
	// retries counts re-run transactions per cause (RetryStats).
	retries retryCounters
	// interpolate records whether placeholders are filled in client-side
	// (see New); for tests.
	interpolate bool
	// gate refuses db's new connections until Start succeeded (the
	// connector's Connect).
	gate store.Gate
	// direct is what Start connects with: db's connector without the gate.
	direct driver.Connector
	// addr names the server in Start's errors: cfg.Addr, "" for several
	// hosts.
	addr string
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn, go-sql-driver/mysql's DSN
// (user:pass@tcp(host:3306)/db?param=value), optionally prefixed with
// "mysql://". The address may list several hosts,
// tcp(h1:3306,h2:3306,h3:3306): each new connection goes to the first one,
// in that order, that answers and is writable (see [ErrNodeRefused]), so a
// server moves on when a node of a Galera cluster dies or leaves the primary
// component (docs/contract.md §8); each host then gets 3 s to accept a
// connection unless the DSN sets timeout. It forces parseTime=true and
// clientFoundRows=true (so that an UPDATE that matches a row counts it even
// when nothing changed) and, unless the DSN sets time_zone, runs sessions in
// UTC so that update_time reads back correctly. It checks that the server answers and, when migrate is true,
// applies the embedded migrations, which adopt an existing Leaf table
// unchanged: [New] and [Store.Start] in one. Errors: a malformed dsn, an unreachable server,
// [store.ErrPermanent] (unknown database, access denied: 1044, 1045, 1049,
// 1698), or a failed
// migration; [ErrNodeRefused] when every host is read-only or not in a
// Galera primary component.
func Open(ctx context.Context, dsn string, migrate bool) (*Store, error) {
	s, err := New(dsn)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx, migrate); err != nil {
		_ = s.Close() // no connection was made through the gate
		return nil, err
	}
	return s, nil
}

// New builds a Store on dsn (as Open takes it) without touching the
// network: every call fails at once with [store.ErrNotOpen] until
// [Store.Start] has succeeded, and the pool connects no earlier. This is
// how leaf-server starts while its database is down. The caller closes
// the Store. Errors: a malformed dsn.
func New(dsn string) (*Store, error) {
	dsn = strings.TrimPrefix(dsn, "mysql://")
	single, addrs, err := SplitHosts(dsn)
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(single)
	if err != nil {
		// The driver's message may quote text next to the password.
		return nil, errors.New("mysql: invalid DSN (want user:pass@tcp(host:3306)/db?param=value)")
	}
	cfg.ParseTime = true
	cfg.ClientFoundRows = true
	// Client-side placeholders, as Leaf's Connector/J does by default
	// (useServerPrepStmts=false): without them the driver prepares and
	// closes every statement with arguments, doubling the round trips of
	// a segment load (BEGIN, UPDATE, SELECT, COMMIT), which a slow database
	// multiplies. A DSN may still say interpolateParams=false; a collation
	// the driver deems unsafe for it keeps server-side statements.
	if !hasParam(dsn, "interpolateParams") && !unsafeCollation(cfg) {
		cfg.InterpolateParams = true
	}
	if _, ok := cfg.Params["time_zone"]; !ok && cfg.Loc == time.UTC {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["time_zone"] = "'+00:00'"
	}
	if len(addrs) > 1 && cfg.Timeout == 0 {
		// A host that drops packets must not hold up the next one for the
		// operating system's connect timeout (minutes).
		cfg.Timeout = multiHostDialTimeout
	}
	s := &Store{interpolate: cfg.InterpolateParams, multiHost: len(addrs) > 1}
	if !s.multiHost {
		s.addr = cfg.Addr
	}
	if s.direct, err = connector(cfg, addrs, nil); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	conn, err := connector(cfg, addrs, &s.gate)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	s.db = sql.OpenDB(conn)
	s.db.SetConnMaxLifetime(connMaxLifetime)
	return s, nil
}

// Start checks that the server answers and, when migrate is true, applies
// the embedded migrations, over a database/sql pool of its own that it
// closes (so that the store's pool never holds a connection made before a
// start that then failed); then it opens the store's calls to the
// database. A failure is what later calls report beside
// [store.ErrNotOpen] until a Start succeeds. Once open, the store stays
// open. Calls of Start must not overlap. Errors: an unreachable server,
// [store.ErrPermanent], [ErrNodeRefused], or a failed migration.
func (s *Store) Start(ctx context.Context, migrate bool) error {
	return s.gate.Settle(s.start(ctx, migrate))
}

// start is Start's ping and migrations.
func (s *Store) start(ctx context.Context, migrate bool) error {
	db := sql.OpenDB(s.direct)
	defer db.Close() // its connections only; nothing to report
	if err := db.PingContext(ctx); err != nil {
		if s.addr == "" {
			return fmt.Errorf("mysql: connect: %w", permanent(err))
		}
		return fmt.Errorf("mysql: connect %s: %w", s.addr, permanent(err))
	}
	if migrate {
		return migrations.Up(ctx, db, "mysql")
	}
	return nil
}

// connector returns a connector that checks every new connection with
// checkNode: on cfg's address, or on the first of addrs that accepts. With
// a gate, it refuses every connection while the gate is closed; nil: no
// gate.
func connector(cfg *mysql.Config, addrs []string, gate *store.Gate) (driver.Connector, error) {
	if len(addrs) < 2 {
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		return nodeConnector{addr: cfg.Addr, gate: gate, Connector: c}, nil
	}
	h := &hostConnector{addrs: addrs, gate: gate}
	for _, a := range addrs {
		c := cfg.Clone()
		c.Addr = a
		conn, err := mysql.NewConnector(c)
		if err != nil {
			return nil, err
		}
		h.conns = append(h.conns, conn)
	}
	return h, nil
}

// hasParam reports whether the query part of a go-sql-driver DSN sets name.
func hasParam(dsn, name string) bool {
	_, query, ok := strings.Cut(dsn, "?")
	if !ok {
		return false
	}
	v, err := url.ParseQuery(query)
	return err == nil && v.Has(name)
}

// unsafeCollation reports whether the driver refuses interpolateParams with
// cfg's collation (multibyte sets whose bytes can hide a backslash).
func unsafeCollation(cfg *mysql.Config) bool {
	c := *cfg
	c.InterpolateParams = true
	_, err := mysql.NewConnector(&c)
	return err != nil
}

// allocateAttempts bounds the retries when the guarded UPDATE matched no row
// but the row read back admits the allocation (it changed in between).
const allocateAttempts = 3

// Allocate implements [store.Store] as Leaf does: UPDATE, then SELECT the row,
// in one transaction. The UPDATE is guarded so that a refused allocation
// leaves the row unchanged; InnoDB evaluates the guard max_id >= mark on the
// row it locks (a locking read of the latest version), so a rewind committed
// meanwhile is seen. A transaction that fails with a deadlock, a lock
// wait timeout, a Galera certification conflict or a TiDB write conflict is
// re-run whole (see [Store.RetryStats]), for at most 10 s and while ctx
// lasts.
func (s *Store) Allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, error) {
	// GREATEST keeps the subtraction from overflowing (MySQL error 1690) when
	// step is negative: MySQL does not promise to evaluate "step > 0" first.
	query := `UPDATE leaf_alloc SET max_id = max_id + step
		WHERE biz_tag = ? AND step > 0 AND max_id <= 9223372036854775807 - GREATEST(step, 0)
			AND max_id >= ?`
	args := []any{tag, store.GuardMark(mark)}
	if step > 0 {
		query = `UPDATE leaf_alloc SET max_id = max_id + ?
			WHERE biz_tag = ? AND step > 0 AND max_id <= 9223372036854775807 - ?
				AND max_id >= ?`
		args = []any{step, tag, step, store.GuardMark(mark)}
	}
	for range allocateAttempts {
		var (
			a       store.Allocation
			refused func() error
		)
		err := s.inTx(ctx, func(c *sql.Conn) (err error) {
			a, refused, err = s.allocate(ctx, c, tag, step, mark, query, args)
			return err
		})
		if err != nil || refused == nil {
			return a, err
		}
		if err := refused(); err != nil {
			return store.Allocation{}, err
		}
	}
	return store.Allocation{}, fmt.Errorf("allocate %q: row changed during %d attempts", tag, allocateAttempts)
}

// allocate runs one allocation transaction on c. When the UPDATE matched no
// row it returns a non-nil refused that classifies the row read in the same
// transaction (nil from refused means: retry).
func (s *Store) allocate(ctx context.Context, c *sql.Conn, tag string, step, mark int64, query string, args []any) (a store.Allocation, refused func() error, err error) {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return store.Allocation{}, nil, fmt.Errorf("allocate %q: %w", tag, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return store.Allocation{}, nil, fmt.Errorf("allocate %q: %w", tag, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.Allocation{}, nil, fmt.Errorf("allocate %q: %w", tag, err)
	}
	var (
		rowTag         string
		maxID, rowStep int64
	)
	err = tx.QueryRowContext(ctx, `SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?`, tag).Scan(&rowTag, &maxID, &rowStep)
	if err == nil && rowTag != tag {
		// A case-insensitive, PAD SPACE collation (MySQL's default) matched
		// another spelling of the tag. Leaf keys tags by their exact name, as
		// PostgreSQL and SQLite compare them; returning here rolls the
		// UPDATE back, so nothing is reserved.
		return store.Allocation{}, nil, fmt.Errorf("allocate %q: %w (the table holds %q, which only the collation matches)", tag, store.ErrTagNotFound, rowTag)
	}
	if n == 0 {
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return store.Allocation{}, nil, fmt.Errorf("allocate %q: %w", tag, err)
		}
		found := err == nil
		return store.Allocation{}, func() error { return store.Refusal(tag, found, maxID, rowStep, step, mark) }, nil
	}
	if err != nil {
		// sql.ErrNoRows here would mean the row vanished under our lock.
		return store.Allocation{}, nil, fmt.Errorf("allocate %q: %w", tag, err)
	}
	if err := tx.Commit(); err != nil {
		return store.Allocation{}, nil, fmt.Errorf("allocate %q: %w", tag, err)
	}
	a = store.Allocation{BizTag: tag, MaxID: maxID, Step: step, DBStep: rowStep}
	if step <= 0 {
		a.Step = rowStep
	}
	return a, nil, nil
}

// Tags implements [store.Store], ordered by biz_tag.
func (s *Store) Tags(ctx context.Context) ([]string, error) { return sqlstore.Tags(ctx, s.db) }

// Rows implements [store.Store].
func (s *Store) Rows(ctx context.Context) ([]store.Row, error) {
	return sqlstore.OrderedRows(ctx, s.db, rowsQuery, scanRow)
}

// rowsQuery reads every leaf_alloc row with its ordered flag (a row in
// leaf_ordered, migration 6). The join converts biz_tag to leaf_ordered's
// utf8mb4_bin, so that it works whatever the charset of a Leaf-made
// leaf_alloc, and matches exact names only, as Allocate.
const rowsQuery = `SELECT a.biz_tag, a.max_id, a.step, a.description, a.update_time, o.biz_tag IS NOT NULL
	FROM leaf_alloc a LEFT JOIN leaf_ordered o ON o.biz_tag = CONVERT(a.biz_tag USING utf8mb4) COLLATE utf8mb4_bin
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
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)`,
			r.BizTag, r.MaxID, r.Step, sqlstore.NullString(r.Description)); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == erDupEntry {
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
			at   time.Time
		)
		// A locking read sees the latest committed tombstone, not the snapshot.
		err := tx.QueryRowContext(ctx, `SELECT max_id, deleted_at FROM leaf_tombstone WHERE biz_tag = ? FOR UPDATE`, r.BizTag).Scan(&tomb, &at)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		case r.MaxID < tomb && !force:
			return &store.TombstoneError{BizTag: r.BizTag, MaxID: r.MaxID, Tombstone: tomb, DeletedAt: at.UTC()}
		case r.MaxID < tomb:
			// Forced below the tombstone: it stays, so that no server gives a
			// tail of the deleted row back into this one (ReturnTail).
			overrode = tomb
			return nil
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM leaf_tombstone WHERE biz_tag = ?`, r.BizTag)
		return err
	})
	// TiDB in optimistic mode checks the primary key at COMMIT, not at the
	// INSERT: the duplicate row arrives as the transaction's 1062.
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erDupEntry {
		err = store.ErrTagExists
	}
	if err != nil {
		return 0, fmt.Errorf("create %q: %w", r.BizTag, err)
	}
	return overrode, nil
}

// tx runs fn in one transaction, committed when fn returns nil and rolled
// back otherwise. Unlike inTx it does not re-run fn: Create and Delete are
// operator actions, answered with the error.
func (s *Store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
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
		`UPDATE leaf_alloc SET step = ?, description = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?`,
		step, sqlstore.NullString(description), tag)
	return sqlstore.Affected("update", tag, res, err)
}

// Delete implements [store.Store]: the row and its leaf_ordered row go out
// and its max_id into the tag's tombstone in one transaction.
func (s *Store) Delete(ctx context.Context, tag string) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var (
			rowTag string
			maxID  int64
		)
		err := tx.QueryRowContext(ctx, `SELECT biz_tag, max_id FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE`, tag).Scan(&rowTag, &maxID)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && rowTag != tag) { // exact names only, as Allocate
			return store.ErrTagNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM leaf_alloc WHERE biz_tag = ?`, tag); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = ?`, tag); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO leaf_tombstone (biz_tag, max_id, deleted_at) VALUES (?, ?, UTC_TIMESTAMP(3))
			ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, ?), deleted_at = UTC_TIMESTAMP(3)`, tag, maxID, maxID)
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
// row afterwards; update_time changes only when max_id was raised. It is
// re-run whole on the errors Allocate retries. Errors:
// [store.ErrTagNotFound].
func (s *Store) Fence(ctx context.Context, tag string, minMaxID int64) (store.Row, error) {
	if err := store.ValidateMaxID(minMaxID); err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	var r store.Row
	err := s.inTx(ctx, func(c *sql.Conn) (err error) {
		r, err = s.fence(ctx, c, tag, minMaxID)
		return err
	})
	return r, err
}

// fence runs Fence's transaction on c.
func (s *Store) fence(ctx context.Context, c *sql.Conn, tag string, minMaxID int64) (store.Row, error) {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx,
		`UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ? AND max_id < ?`,
		minMaxID, tag, minMaxID); err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	// A locking read sees the latest committed row, not the snapshot.
	r, err := scanRow(tx.QueryRowContext(ctx,
		`SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE`, tag))
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

// ReturnTail implements [store.Store], re-run whole on the retryable errors
// as every transaction of this store.
func (s *Store) ReturnTail(ctx context.Context, tag string, from, to, seq int64) (bool, error) {
	if err := store.ValidateTailReturn(from, to, seq); err != nil {
		return false, fmt.Errorf("return tail of %q: %w", tag, err)
	}
	var ok bool
	err := s.inTx(ctx, func(c *sql.Conn) error {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("return tail of %q: %w", tag, err)
		}
		defer tx.Rollback()
		ok, err = sqlstore.ReturnTail(ctx, tx, "CURRENT_TIMESTAMP", tag, from, to, seq)
		if err != nil || !ok {
			return err
		}
		if err := tx.Commit(); err != nil {
			ok = false
			return fmt.Errorf("return tail of %q: %w", tag, err)
		}
		return nil
	})
	return ok, err
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

// Close implements [store.Store].
func (s *Store) Close() error { return s.db.Close() }

// scanRow reads the sqlstore.RowColumns of one row.
func scanRow(sc sqlstore.Scanner) (store.Row, error) {
	var (
		r    store.Row
		desc sql.NullString
	)
	if err := sc.Scan(&r.BizTag, &r.MaxID, &r.Step, &desc, &r.UpdateTime); err != nil {
		return store.Row{}, err
	}
	r.Description = desc.String
	return r, nil
}

// MaxID reads the max_id of tag without changing it (segment's restore
// check before an allocation). The read is re-run on the errors Allocate
// retries (a Galera node that left the primary component answers it with
// 1047). Errors: [store.ErrTagNotFound].
func (s *Store) MaxID(ctx context.Context, tag string) (int64, error) {
	var (
		v      int64
		rowTag string
	)
	err := s.inTx(ctx, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, `SELECT biz_tag, max_id FROM leaf_alloc WHERE biz_tag = ?`, tag).Scan(&rowTag, &v)
	})
	if errors.Is(err, sql.ErrNoRows) || (err == nil && rowTag != tag) { // exact names only, as Allocate
		return 0, fmt.Errorf("max_id %q: %w", tag, store.ErrTagNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("max_id %q: %w", tag, err)
	}
	return v, nil
}
