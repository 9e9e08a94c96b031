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
const leaseColumns = `worker_id, generation, coalesce(owner, ''), high_water_ms, expires_at, reported_ms`

// epoch is what ReleaseWorker writes into expires_at: long past.
const epoch = `'1970-01-01 00:00:00.000'`

// skipLocked is the locking clause of the claim's read.
const skipLocked = "FOR UPDATE SKIP LOCKED"

// ClaimWorker implements [store.LeaseStore]. In one READ COMMITTED
// transaction it locks the lowest expired row of the range with SELECT … FOR
// UPDATE SKIP LOCKED (MySQL 8.0+, MariaDB 10.6+; older servers fall back to
// a plain FOR UPDATE, which queues concurrent claimers on the row instead of
// skipping it), then bumps its generation and sets its expiry with an UPDATE
// that re-checks the generation read and the expiry against UTC_TIMESTAMP(3).
// Where the lock does not lock (TiDB accepts SKIP LOCKED and neither locks
// nor skips), a claimer that lost the row to another changes nothing, and the
// claim is re-run, up to store.MaxClaimAttempts times. Missing rows of the
// range are inserted first, in their own statements, only when some are
// missing. The claim is re-run whole on the errors Allocate retries, as are
// RenewWorker and ReleaseWorker.
func (s *Store) ClaimWorker(ctx context.Context, c store.Claim) (store.Lease, error) {
	return s.claimWorker(ctx, c, skipLocked)
}

// claimWorker is ClaimWorker with the read's locking clause given (tests run
// it with none, as TiDB's SKIP LOCKED behaves).
func (s *Store) claimWorker(ctx context.Context, c store.Claim, lock string) (store.Lease, error) {
	if err := store.ValidateClaim(c); err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	if err := s.seedWorkers(ctx, c.MinWorker, c.MaxWorker); err != nil {
		return store.Lease{}, err
	}
	for range store.MaxClaimAttempts {
		var (
			l   store.Lease
			won bool
		)
		err := s.inTx(ctx, func(conn *sql.Conn) (err error) {
			l, won, err = s.claim(ctx, conn, c, lock)
			return err
		})
		var me *mysql.MySQLError
		if lock == skipLocked && errors.As(err, &me) && me.Number == erParseError {
			lock = "FOR UPDATE"
			continue
		}
		if err != nil || won {
			return l, err
		}
		// Another claimer took the row between the read and the write.
	}
	return store.Lease{}, store.Contended(c)
}

// claim runs one attempt of ClaimWorker's transaction on conn; won is false
// when the guarded UPDATE found the picked row claimed by someone else.
func (s *Store) claim(ctx context.Context, conn *sql.Conn, c store.Claim, lock string) (l store.Lease, won bool, err error) {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("claim worker ID: %w", err)
	}
	defer tx.Rollback()
	var id, gen int64
	err = tx.QueryRowContext(ctx, `SELECT worker_id, generation FROM leaf_worker_lease
		WHERE worker_id BETWEEN ? AND ? AND expires_at < UTC_TIMESTAMP(3)
		ORDER BY worker_id LIMIT 1 `+lock, c.MinWorker, c.MaxWorker).Scan(&id, &gen)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, false, store.NoFreeWorker(c)
	}
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("claim worker ID: %w", err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE leaf_worker_lease
		SET owner = ?, generation = generation + 1, reported_ms = ?,
			expires_at = DATE_ADD(UTC_TIMESTAMP(3), INTERVAL ? MICROSECOND), updated_at = UTC_TIMESTAMP(3)
		WHERE worker_id = ? AND generation = ? AND expires_at < UTC_TIMESTAMP(3)`,
		sqlstore.NullString(c.Owner), c.ClockMillis, c.TTL.Milliseconds()*1000, id, gen)
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("claim worker ID %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("claim worker ID %d: %w", id, err)
	}
	if n == 0 {
		return store.Lease{}, false, nil
	}
	l, err = scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leaf_worker_lease WHERE worker_id = ?`, id), c.TTL)
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("claim worker ID %d: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return store.Lease{}, false, fmt.Errorf("claim worker ID %d: %w", id, err)
	}
	return l, true, nil
}

// seedLockName is the GET_LOCK name that serialises the insertion of missing
// lease rows across servers.
const seedLockName = "leaf-go:worker-lease-rows"

// seedLockWait is how long ClaimWorker waits for another server's insertion
// of the lease rows.
const seedLockWait = 10 * time.Second

// seedWorkers inserts the rows of minWorker..maxWorker that do not exist yet, under a
// named lock, so that concurrent claimers never meet each other's row locks
// of half-inserted or duplicate rows (SKIP LOCKED would skip those rows and
// hand out a higher ID than the lowest free one). It is re-run whole on the
// errors Allocate retries: TiDB runs GET_LOCK as a pessimistic transaction
// of its own, which fails with 1105 "pessimistic lock retry limit reached"
// when many servers take the lock at once (16 claimers at once in TestTiDB
// met it once). Re-running is safe: the rows still missing are listed again
// and inserted with INSERT IGNORE.
func (s *Store) seedWorkers(ctx context.Context, minWorker, maxWorker int64) error {
	if n, err := countWorkers(ctx, s.db, minWorker, maxWorker); err != nil || n == maxWorker-minWorker+1 {
		return err
	}
	return s.inTx(ctx, func(conn *sql.Conn) error { return seedWorkersOn(ctx, conn, minWorker, maxWorker) })
}

// seedWorkersOn is one attempt of seedWorkers on conn.
func seedWorkersOn(ctx context.Context, conn *sql.Conn, minWorker, maxWorker int64) error {
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
	rows, err := conn.QueryContext(ctx, `SELECT worker_id FROM leaf_worker_lease WHERE worker_id BETWEEN ? AND ?`, minWorker, maxWorker)
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
	missing := store.MissingWorkers(minWorker, maxWorker, have)
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

// countWorkers counts the rows of minWorker..maxWorker.
func countWorkers(ctx context.Context, db *sql.DB, minWorker, maxWorker int64) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM leaf_worker_lease WHERE worker_id BETWEEN ? AND ?`, minWorker, maxWorker).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("claim worker ID: count rows: %w", err)
	}
	return n, nil
}

// RenewWorker implements [store.LeaseStore]: an UPDATE fenced by the
// generation, then a read of the row, in one transaction.
func (s *Store) RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis, clockMillis int64) (store.Lease, error) {
	if err := store.ValidateRenew(workerID, ttl, highWaterMillis, clockMillis); err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	var l store.Lease
	err := s.inTx(ctx, func(c *sql.Conn) (err error) {
		l, err = s.renew(ctx, c, workerID, generation, ttl, highWaterMillis, clockMillis)
		return err
	})
	return l, err
}

// renew runs RenewWorker's transaction on c.
func (s *Store) renew(ctx context.Context, c *sql.Conn, workerID, generation int64, ttl time.Duration, highWaterMillis, clockMillis int64) (store.Lease, error) {
	tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE leaf_worker_lease
		SET expires_at = DATE_ADD(UTC_TIMESTAMP(3), INTERVAL ? MICROSECOND),
			high_water_ms = GREATEST(high_water_ms, ?), reported_ms = ?, updated_at = UTC_TIMESTAMP(3)
		WHERE worker_id = ? AND generation = ?`, ttl.Milliseconds()*1000, highWaterMillis, clockMillis, workerID, generation)
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
func (s *Store) ReleaseWorker(ctx context.Context, workerID, generation, finalMarkMillis int64) error {
	return s.inTx(ctx, func(c *sql.Conn) error {
		res, err := c.ExecContext(ctx, `UPDATE leaf_worker_lease
			SET expires_at = `+epoch+`, updated_at = UTC_TIMESTAMP(3),
			high_water_ms = IF(? > 0, ?, high_water_ms)
			WHERE worker_id = ? AND generation = ?`, finalMarkMillis, finalMarkMillis, workerID, generation)
		return lost(res, err, "release", workerID, generation)
	})
}

// LiveHolders implements [store.LeaseStore].
func (s *Store) LiveHolders(ctx context.Context) ([]store.Holder, time.Time, error) {
	var (
		out []store.Holder
		now time.Time
	)
	err := s.inTx(ctx, func(c *sql.Conn) error {
		out = out[:0]
		if err := c.QueryRowContext(ctx, `SELECT UTC_TIMESTAMP(3)`).Scan(&now); err != nil {
			return err
		}
		rows, err := c.QueryContext(ctx, `SELECT worker_id, coalesce(owner, ''), reported_ms, updated_at, expires_at
			FROM leaf_worker_lease WHERE expires_at > UTC_TIMESTAMP(3) ORDER BY worker_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h store.Holder
			if err := rows.Scan(&h.WorkerID, &h.Owner, &h.ClockMillis, &h.WrittenAt, &h.ExpiresAt); err != nil {
				return err
			}
			h.WrittenAt, h.ExpiresAt = utc(h.WrittenAt), utc(h.ExpiresAt)
			out = append(out, h)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list live worker ID holders: %w", err)
	}
	return out, utc(now), nil
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
	if err := row.Scan(&l.WorkerID, &l.Generation, &l.Owner, &l.HighWaterMillis, &l.ExpiresAt, &l.ClockMillis); err != nil {
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
