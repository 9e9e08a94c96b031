// Package postgres is the leaf_alloc store on PostgreSQL, through a pgx/v5
// connection pool. An allocation is one UPDATE … RETURNING round trip: the
// row lock serialises concurrent servers, which get disjoint segments.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leaf-go/leaf/migrations"
	"github.com/leaf-go/leaf/store"
)

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

// permanentStates are the SQLSTATEs of a connection refused for good
// ([store.ErrPermanent]): invalid_catalog_name (the database does not
// exist), invalid_password and invalid_authorization_specification (no such
// role, or pg_hba.conf refuses it).
var permanentStates = map[string]bool{"3D000": true, "28P01": true, "28000": true}

// permanent wraps err with [store.ErrPermanent] when the server refused the
// connection for good.
func permanent(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && permanentStates[pe.Code] {
		return fmt.Errorf("%w: %w", store.ErrPermanent, err)
	}
	return err
}

// Store is a leaf_alloc store on one PostgreSQL database. It is safe for
// concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// retries counts re-run statements per cause (RetryStats).
	retries retryCounters
	// gate refuses the pool's new connections until Start succeeded
	// (the pool's BeforeConnect).
	gate store.Gate
	// conn is what Start connects with: the pool's connection settings.
	conn *pgx.ConnConfig
}

var _ store.Store = (*Store)(nil)

// defaultConnectTimeout bounds a connection attempt of Start when the DSN
// sets no connect_timeout, as pgxpool bounds its own.
const defaultConnectTimeout = 2 * time.Minute

// Open connects to the PostgreSQL database named by dsn (a postgres:// or
// postgresql:// URL, or libpq key=value settings, as pgxpool.ParseConfig
// takes; pool_max_conns and friends are honoured), checks that it answers
// and, when migrate is true, applies the embedded migrations: [New] and
// [Store.Start] in one. Errors: a malformed dsn, an unreachable server,
// [store.ErrPermanent] (the database does not exist, or the credentials were
// refused), or a failed migration.
func Open(ctx context.Context, dsn string, migrate bool) (*Store, error) {
	s, err := New(dsn)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx, migrate); err != nil {
		_ = s.Close() // always nil
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
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn redacts the password in ParseConfigError.
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{conn: cfg.ConnConfig.Copy()}
	if s.conn.ConnectTimeout <= 0 {
		s.conn.ConnectTimeout = defaultConnectTimeout
	}
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error { return s.gate.Check() }
	// No I/O here: with pool_min_conns the pool connects in the background,
	// through the gate.
	s.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return s, nil
}

// Start checks that the database answers and, when migrate is true,
// applies the embedded migrations, over a connection of its own that it
// closes (so that the pool never holds a connection made before a start
// that then failed); then it opens the store's calls to the database. A
// failure is what later calls report beside [store.ErrNotOpen] until a
// Start succeeds. Once open, the store stays open. Calls of Start must not
// overlap. Errors: an unreachable server, [store.ErrPermanent] (the
// database does not exist, or the credentials were refused), or a failed
// migration.
func (s *Store) Start(ctx context.Context, migrate bool) error {
	return s.gate.Settle(s.start(ctx, migrate))
}

// start is Start's ping and migrations, on a database/sql pool of its own.
func (s *Store) start(ctx context.Context, migrate bool) error {
	db := stdlib.OpenDB(*s.conn)
	defer db.Close() // its connections only; nothing to report
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("postgres: connect %s:%d: %w", s.conn.Host, s.conn.Port, permanent(err))
	}
	if migrate {
		return migrations.Up(ctx, db, "postgres")
	}
	return nil
}

// allocateAttempts bounds the retries when the guarded UPDATE matched no row
// but the row read back admits the allocation (it changed in between).
const allocateAttempts = 3

// Allocate implements [store.Store] with one UPDATE … RETURNING round trip,
// guarded so that a refused allocation leaves the row unchanged: the guard
// max_id >= mark is re-evaluated by PostgreSQL on the row version it locks,
// so a rewind committed meanwhile is seen. The statement is re-run on the
// errors of retryCause (see [Store.RetryStats]), for at most 10 s and while
// ctx lasts.
func (s *Store) Allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, error) {
	// GREATEST keeps the subtraction from overflowing when step is negative:
	// PostgreSQL does not promise to evaluate "step > 0" first.
	query := `UPDATE leaf_alloc SET max_id = max_id + step, update_time = now()
		WHERE biz_tag = $1 AND step > 0 AND max_id <= 9223372036854775807 - GREATEST(step, 0)
			AND max_id >= $2::bigint
		RETURNING max_id, step`
	args := []any{tag, store.GuardMark(mark)}
	if step > 0 {
		query = `UPDATE leaf_alloc SET max_id = max_id + $3::bigint, update_time = now()
			WHERE biz_tag = $1 AND step > 0 AND max_id <= 9223372036854775807 - $3::bigint
				AND max_id >= $2::bigint
			RETURNING max_id, step`
		args = append(args, step)
	}
	conflicts, giveUp := 0, time.Now().Add(maxConflictWait)
	for attempt := 0; attempt < allocateAttempts; attempt++ {
		var a store.Allocation
		err := s.pool.QueryRow(ctx, query, args...).Scan(&a.MaxID, &a.DBStep)
		if cause := retryCause(err); cause >= 0 && time.Now().Before(giveUp) {
			// The statement rolled back whole: nothing was reserved, so
			// running it again cannot hand out a range twice.
			s.retries[cause].Add(1)
			conflicts++
			attempt--
			if err := sleepCtx(ctx, conflictBackoff(conflicts)); err != nil {
				return store.Allocation{}, fmt.Errorf("allocate %q: %w", tag, err)
			}
			continue
		}
		if err == nil {
			a.BizTag, a.Step = tag, step
			if step <= 0 {
				a.Step = a.DBStep
			}
			return a, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.Allocation{}, fmt.Errorf("allocate %q: %w", tag, err)
		}
		var maxID, rowStep int64
		err = s.pool.QueryRow(ctx, `SELECT max_id, step FROM leaf_alloc WHERE biz_tag = $1`, tag).Scan(&maxID, &rowStep)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return store.Allocation{}, fmt.Errorf("allocate %q: %w", tag, err)
		}
		if err := store.Refusal(tag, err == nil, maxID, rowStep, step, mark); err != nil {
			return store.Allocation{}, err
		}
	}
	return store.Allocation{}, fmt.Errorf("allocate %q: row changed during %d attempts", tag, allocateAttempts)
}

// Tags implements [store.Store], ordered by biz_tag.
func (s *Store) Tags(ctx context.Context) ([]string, error) {
	rows, _ := s.pool.Query(ctx, `SELECT biz_tag FROM leaf_alloc ORDER BY biz_tag`)
	tags, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	return tags, nil
}

// Rows implements [store.Store].
func (s *Store) Rows(ctx context.Context) ([]store.Row, error) {
	rows, _ := s.pool.Query(ctx, rowsQuery)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Row, error) {
		var ordered bool
		row, err := scanRow(orderedRow{Row: r, ordered: &ordered})
		row.Ordered = ordered
		return row, err
	})
	if err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	return out, nil
}

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
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx,
			`INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES ($1, $2, $3, $4, now())`,
			r.BizTag, r.MaxID, r.Step, nullString(r.Description)); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == uniqueViolation {
				return store.ErrTagExists
			}
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = $1`, r.BizTag); err != nil {
			return err
		}
		if r.Ordered {
			if _, err := tx.Exec(ctx, `INSERT INTO leaf_ordered (biz_tag) VALUES ($1)`, r.BizTag); err != nil {
				return err
			}
		}
		var (
			tomb int64
			at   time.Time
		)
		err := tx.QueryRow(ctx, `DELETE FROM leaf_tombstone WHERE biz_tag = $1 RETURNING max_id, deleted_at`, r.BizTag).Scan(&tomb, &at)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		case r.MaxID >= tomb:
			return nil
		case !force:
			return &store.TombstoneError{BizTag: r.BizTag, MaxID: r.MaxID, Tombstone: tomb, DeletedAt: at.UTC()}
		}
		// Forced below the tombstone: it stays, so that no server gives a
		// tail of the deleted row back into this one (ReturnTail).
		overrode = tomb
		_, err = tx.Exec(ctx, `INSERT INTO leaf_tombstone (biz_tag, max_id, deleted_at) VALUES ($1, $2, $3)`, r.BizTag, tomb, at)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("create %q: %w", r.BizTag, err)
	}
	return overrode, nil
}

// Update sets the step (in IDs, 1..store.MaxStep) and the description of an
// existing row; max_id is never touched. Errors: [store.ErrBadStep],
// [store.ErrTagNotFound].
func (s *Store) Update(ctx context.Context, tag string, step int64, description string) error {
	if err := store.ValidateRow(store.Row{BizTag: tag, Step: step, Description: description}); err != nil {
		return fmt.Errorf("update %q: %w", tag, err)
	}
	ct, err := s.pool.Exec(ctx,
		`UPDATE leaf_alloc SET step = $2, description = $3, update_time = now() WHERE biz_tag = $1`,
		tag, step, nullString(description))
	return affected("update", tag, ct, err)
}

// Delete implements [store.Store]: the row and its leaf_ordered row go out
// and its max_id into the tag's tombstone in one transaction.
func (s *Store) Delete(ctx context.Context, tag string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var maxID int64
		err := tx.QueryRow(ctx, `DELETE FROM leaf_alloc WHERE biz_tag = $1 RETURNING max_id`, tag).Scan(&maxID)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrTagNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = $1`, tag); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO leaf_tombstone (biz_tag, max_id, deleted_at) VALUES ($1, $2, now() AT TIME ZONE 'UTC')
			ON CONFLICT (biz_tag) DO UPDATE SET max_id = GREATEST(leaf_tombstone.max_id, EXCLUDED.max_id),
				deleted_at = EXCLUDED.deleted_at`, tag, maxID)
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
	// One statement that always takes the row lock, so the row returned is
	// the latest one even when a concurrent allocation raced the fence.
	r, err := scanRow(s.pool.QueryRow(ctx, `
		UPDATE leaf_alloc SET max_id = GREATEST(max_id, $2::bigint),
			update_time = CASE WHEN max_id < $2::bigint THEN now() ELSE update_time END
		WHERE biz_tag = $1
		RETURNING biz_tag, max_id, step, description, update_time`, tag, minMaxID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, store.ErrTagNotFound)
	}
	if err != nil {
		return store.Row{}, fmt.Errorf("fence %q: %w", tag, err)
	}
	return r, nil
}

// ReturnTail implements [store.Store]: one transaction, re-run whole on the
// retryable errors.
func (s *Store) ReturnTail(ctx context.Context, tag string, from, to, seq int64) (bool, error) {
	if err := store.ValidateTailReturn(from, to, seq); err != nil {
		return false, fmt.Errorf("return tail of %q: %w", tag, err)
	}
	var ok bool
	err := s.retry(ctx, func() error {
		ok = false
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			// A tag with a tombstone was re-created by force below it (a plain
			// re-create removes it): its row may have reached max_id = from
			// anew, so no tail goes back.
			ct, err := tx.Exec(ctx, `UPDATE leaf_alloc SET max_id = $2, update_time = now() WHERE biz_tag = $1 AND max_id = $3
				AND NOT EXISTS (SELECT 1 FROM leaf_tombstone WHERE biz_tag = $1)`, tag, to, from)
			if err != nil || ct.RowsAffected() != 1 {
				return err // someone allocated after the caller: no-op
			}
			if seq == 1 {
				ct, err = tx.Exec(ctx, `INSERT INTO leaf_tail_return (biz_tag, returned_from, returned_to, seq)
					VALUES ($1, $2, $3, 1) ON CONFLICT (biz_tag) DO NOTHING`, tag, from, to)
			} else {
				ct, err = tx.Exec(ctx, `UPDATE leaf_tail_return SET returned_from = $2, returned_to = $3, seq = $4
					WHERE biz_tag = $1 AND seq = $4 - 1`, tag, from, to, seq)
			}
			if err != nil {
				return err
			}
			if ct.RowsAffected() != 1 {
				return errTailRolledBack // the record moved on: undo the UPDATE
			}
			ok = true
			return nil
		})
	})
	if errors.Is(err, errTailRolledBack) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("return tail of %q: %w", tag, err)
	}
	return ok, nil
}

// errTailRolledBack rolls back a ReturnTail whose record moved on.
var errTailRolledBack = errors.New("tail return record moved on")

// TailReturns implements [store.Store].
func (s *Store) TailReturns(ctx context.Context) ([]store.TailReturn, error) {
	rows, err := s.pool.Query(ctx, `SELECT biz_tag, returned_from, returned_to, seq FROM leaf_tail_return`)
	if err != nil {
		return nil, fmt.Errorf("read tail returns: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.TailReturn, error) {
		var t store.TailReturn
		err := r.Scan(&t.BizTag, &t.From, &t.To, &t.Seq)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read tail returns: %w", err)
	}
	return out, nil
}

// TailReturnOf implements [store.Store].
func (s *Store) TailReturnOf(ctx context.Context, tag string) (store.TailReturn, error) {
	t := store.TailReturn{BizTag: tag}
	err := s.pool.QueryRow(ctx, `SELECT returned_from, returned_to, seq FROM leaf_tail_return WHERE biz_tag = $1`, tag).
		Scan(&t.From, &t.To, &t.Seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.TailReturn{}, nil
	}
	if err != nil {
		return store.TailReturn{}, fmt.Errorf("read tail return of %q: %w", tag, err)
	}
	return t, nil
}

// Ping implements [store.Store].
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Close implements [store.Store]; it waits for acquired connections to be
// released.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// affected maps an UPDATE or DELETE by biz_tag that changed no row to
// [store.ErrTagNotFound].
func affected(op, tag string, ct pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("%s %q: %w", op, tag, err)
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("%s %q: %w", op, tag, store.ErrTagNotFound)
	}
	return nil
}

func scanRow(row pgx.Row) (store.Row, error) {
	var (
		r    store.Row
		desc *string
	)
	if err := row.Scan(&r.BizTag, &r.MaxID, &r.Step, &desc, &r.UpdateTime); err != nil {
		return store.Row{}, err
	}
	if desc != nil {
		r.Description = *desc
	}
	return r, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MaxID reads the max_id of tag without changing it (segment's restore
// check before an allocation). Errors: [store.ErrTagNotFound].
func (s *Store) MaxID(ctx context.Context, tag string) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT max_id FROM leaf_alloc WHERE biz_tag = $1`, tag).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("max_id %q: %w", tag, store.ErrTagNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("max_id %q: %w", tag, err)
	}
	return v, nil
}
