package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/internal/sqlstore"
)

var _ store.LeaseStore = (*Store)(nil)

// erParseError is MySQL's error number for a syntax error (ER_PARSE_ERROR):
// what servers older than MySQL 8.0 / MariaDB 10.6 answer to SKIP LOCKED.
const erParseError = 1064

// seedBatch is the number of rows per INSERT when ClaimWorker creates the
// missing rows of 0..maxWorker.
const seedBatch = 1000

// leaseColumns is what the lease statements read back, in scanLease's order.
// The instants are DATETIME(3) in UTC, compared and written only with
// UTC_TIMESTAMP(3), so the session's time_zone plays no part. DBNow is not
// read: it is expires_at - ttl, the UTC_TIMESTAMP(3) that the UPDATE used
// (constant within a statement), where a later SELECT would read a later one.
const leaseColumns = `worker_id, generation, coalesce(owner, ''), high_water_ms, expires_at`

// epoch is what ReleaseWorker writes into expires_at: long past.
const epoch = `'1970-01-01 00:00:00.000'`

// ClaimWorker implements [store.LeaseStore]. In one READ COMMITTED transaction
// it locks the lowest expired row with SELECT … FOR UPDATE SKIP LOCKED (MySQL
// 8.0+, MariaDB 10.6+; older servers fall back to a plain FOR UPDATE, which
// queues concurrent claimers on the row instead of skipping it), bumps its
// generation and sets its expiry. Missing rows of 0..maxWorker are inserted
// first, in their own statements, only when some are missing. The claim is
// re-run whole on the errors Allocate retries, as are RenewWorker and
// ReleaseWorker.
func (s *Store) ClaimWorker(ctx context.Context, owner string, maxWorker int64, ttl time.Duration) (store.Lease, error) {
	if err := store.ValidateClaim(maxWorker, ttl); err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	if err := s.seedWorkers(ctx, maxWorker); err != nil {
		return store.Lease{}, err
	}
	var l store.Lease
	claim := func(lock string) error {
		return s.inTx(ctx, func(c *sql.Conn) (err error) {
			l, err = s.claim(ctx, c, owner, maxWorker, ttl, lock)
			return err
		})
	}
	err := claim("FOR UPDATE SKIP LOCKED")
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erParseError {
		err = claim("FOR UPDATE")
	}
	return l, err
}

// claim runs ClaimWorker's transaction on c.
func (s *Store) claim(ctx context.Context, c *sql.Conn, owner string, maxWorker int64, ttl time.Duration, lock string) (store.Lease, error) {
	tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, `SELECT worker_id FROM leaf_worker_lease
		WHERE worker_id BETWEEN 0 AND ? AND expires_at < UTC_TIMESTAMP(3)
		ORDER BY worker_id LIMIT 1 `+lock, maxWorker).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, store.NoFreeWorker(maxWorker, ttl)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE leaf_worker_lease
		SET owner = ?, generation = generation + 1,
			expires_at = DATE_ADD(UTC_TIMESTAMP(3), INTERVAL ? MICROSECOND), updated_at = UTC_TIMESTAMP(3)
		WHERE worker_id = ?`, sqlstore.NullString(owner), ttl.Milliseconds()*1000, id); err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID %d: %w", id, err)
	}
	l, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leaf_worker_lease WHERE worker_id = ?`, id), ttl)
	if err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID %d: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID %d: %w", id, err)
	}
	return l, nil
}

// seedLockName is the GET_LOCK name that serialises the insertion of missing
// lease rows across servers.
const seedLockName = "leaf-go:worker-lease-rows"

// seedLockWait is how long ClaimWorker waits for another server's insertion
// of the lease rows.
const seedLockWait = 10 * time.Second

// seedWorkers inserts the rows of 0..maxWorker that do not exist yet, under a
// named lock, so that concurrent claimers never meet each other's row locks
// of half-inserted or duplicate rows (SKIP LOCKED would skip those rows and
// hand out a higher ID than the lowest free one).
func (s *Store) seedWorkers(ctx context.Context, maxWorker int64) error {
	if n, err := countWorkers(ctx, s.db, maxWorker); err != nil || n == maxWorker+1 {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("claim worker ID: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", seedLockName, int(seedLockWait/time.Second)).Scan(&got); err != nil {
		return fmt.Errorf("claim worker ID: lock %q: %w", seedLockName, err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("claim worker ID: lock %q still held by another server after %v", seedLockName, seedLockWait)
	}
	// Released explicitly so that the pooled connection never keeps it.
	// A failed release leaves the lock on the pooled session until that
	// session ends; other servers' claims then wait seedLockWait and fail
	// with "still held", which refuses a claim but never shares a worker ID.
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", seedLockName) }()
	rows, err := conn.QueryContext(ctx, `SELECT worker_id FROM leaf_worker_lease WHERE worker_id BETWEEN 0 AND ?`, maxWorker)
	if err != nil {
		return fmt.Errorf("claim worker ID: list rows: %w", err)
	}
	var have []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("claim worker ID: list rows: %w", err)
		}
		have = append(have, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("claim worker ID: list rows: %w", err)
	}
	missing := store.MissingWorkers(maxWorker, have)
	for len(missing) > 0 {
		batch := missing[:min(seedBatch, len(missing))]
		missing = missing[len(batch):]
		var b strings.Builder
		// IGNORE: a server of an older leaf-go may insert without the lock.
		b.WriteString(`INSERT IGNORE INTO leaf_worker_lease (worker_id, updated_at) VALUES `)
		for i, id := range batch {
			if i > 0 {
				b.WriteByte(',')
			}
			// Integers we computed ourselves: no quoting needed.
			b.WriteString("(" + strconv.FormatInt(id, 10) + ", UTC_TIMESTAMP(3))")
		}
		if _, err := conn.ExecContext(ctx, b.String()); err != nil {
			return fmt.Errorf("claim worker ID: insert rows: %w", err)
		}
	}
	return nil
}

// countWorkers counts the rows of 0..maxWorker.
func countWorkers(ctx context.Context, db *sql.DB, maxWorker int64) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM leaf_worker_lease WHERE worker_id BETWEEN 0 AND ?`, maxWorker).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("claim worker ID: count rows: %w", err)
	}
	return n, nil
}

// RenewWorker implements [store.LeaseStore]: an UPDATE fenced by the
// generation, then a read of the row, in one transaction.
func (s *Store) RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis int64) (store.Lease, error) {
	if err := store.ValidateRenew(workerID, ttl, highWaterMillis); err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	var l store.Lease
	err := s.inTx(ctx, func(c *sql.Conn) (err error) {
		l, err = s.renew(ctx, c, workerID, generation, ttl, highWaterMillis)
		return err
	})
	return l, err
}

// renew runs RenewWorker's transaction on c.
func (s *Store) renew(ctx context.Context, c *sql.Conn, workerID, generation int64, ttl time.Duration, highWaterMillis int64) (store.Lease, error) {
	tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE leaf_worker_lease
		SET expires_at = DATE_ADD(UTC_TIMESTAMP(3), INTERVAL ? MICROSECOND),
			high_water_ms = GREATEST(high_water_ms, ?), updated_at = UTC_TIMESTAMP(3)
		WHERE worker_id = ? AND generation = ?`, ttl.Milliseconds()*1000, highWaterMillis, workerID, generation)
	if err := lost(res, err, "renew", workerID, generation); err != nil {
		return store.Lease{}, err
	}
	l, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leaf_worker_lease WHERE worker_id = ?`, workerID), ttl)
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	if err := tx.Commit(); err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	return l, nil
}

// ReleaseWorker implements [store.LeaseStore].
func (s *Store) ReleaseWorker(ctx context.Context, workerID, generation int64) error {
	return s.inTx(ctx, func(c *sql.Conn) error {
		res, err := c.ExecContext(ctx, `UPDATE leaf_worker_lease
			SET expires_at = `+epoch+`, updated_at = UTC_TIMESTAMP(3)
			WHERE worker_id = ? AND generation = ?`, workerID, generation)
		return lost(res, err, "release", workerID, generation)
	})
}

// lost maps a fenced UPDATE that matched no row to [store.ErrLeaseLost]
// (clientFoundRows makes a matched row count even when nothing changed).
func lost(res sql.Result, err error, op string, workerID, generation int64) error {
	if err != nil {
		return fmt.Errorf("%s worker ID %d: %w", op, workerID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s worker ID %d: %w", op, workerID, err)
	}
	if n == 0 {
		return fmt.Errorf("%s worker ID %d generation %d: %w", op, workerID, generation, store.ErrLeaseLost)
	}
	return nil
}

// scanLease reads leaseColumns of a row just written with expires_at =
// UTC_TIMESTAMP(3) + ttl.
func scanLease(row *sql.Row, ttl time.Duration) (store.Lease, error) {
	var l store.Lease
	if err := row.Scan(&l.WorkerID, &l.Generation, &l.Owner, &l.HighWaterMillis, &l.ExpiresAt); err != nil {
		return store.Lease{}, err
	}
	l.ExpiresAt = utc(l.ExpiresAt)
	l.DBNow = l.ExpiresAt.Add(-ttl.Truncate(time.Millisecond))
	return l, nil
}

// utc reads t's wall clock as UTC: the DATETIME columns hold UTC, but the
// driver parses them in the DSN's loc, which need not be UTC.
func utc(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
