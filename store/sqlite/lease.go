package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/internal/sqlstore"
)

var _ store.LeaseStore = (*Store)(nil)

// leaseColumns is what the lease statements return, in scanLease's order.
// SQLite keeps 'now' fixed for the whole statement, so DBNow is the instant
// expires_at was computed from.
const leaseColumns = `worker_id, generation, coalesce(owner, ''), high_water_ms, expires_at, ` + now + `, reported_ms`

// epoch is what ReleaseWorker writes into expires_at: long past.
const epoch = `'1970-01-01 00:00:00.000'`

// leaseLayout parses the expires_at text and strftime's output.
const leaseLayout = "2006-01-02 15:04:05.000"

// ClaimWorker implements [store.LeaseStore] in one BEGIN IMMEDIATE
// transaction (the file's write lock serialises claimers in all processes):
// insert the missing rows of the range, then one UPDATE … RETURNING of the
// lowest expired row. The clock is the host's, shared by every process that
// opens the file. The write lock keeps claimers apart; the UPDATE re-checks
// the expiry all the same, as the other dialects do.
func (s *Store) ClaimWorker(ctx context.Context, c store.Claim) (store.Lease, error) {
	if err := store.ValidateClaim(c); err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil) // IMMEDIATE: the DSN sets _txlock
	if err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	defer tx.Rollback()
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM leaf_worker_lease WHERE worker_id BETWEEN ? AND ?`, c.MinWorker, c.MaxWorker).Scan(&n); err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: count rows: %w", err)
	}
	if n < c.MaxWorker-c.MinWorker+1 {
		if _, err := tx.ExecContext(ctx, `
			WITH RECURSIVE seq(n) AS (SELECT ?1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?2)
			INSERT OR IGNORE INTO leaf_worker_lease (worker_id) SELECT n FROM seq`, c.MinWorker, c.MaxWorker); err != nil {
			return store.Lease{}, fmt.Errorf("claim worker ID: insert rows %d..%d: %w", c.MinWorker, c.MaxWorker, err)
		}
	}
	l, err := scanLease(tx.QueryRowContext(ctx, `
		UPDATE leaf_worker_lease
		SET owner = ?3, generation = generation + 1, reported_ms = ?5,
			expires_at = strftime('%Y-%m-%d %H:%M:%f', 'now', ?4), updated_at = `+now+`
		WHERE worker_id = (
			SELECT worker_id FROM leaf_worker_lease
			WHERE worker_id BETWEEN ?1 AND ?2 AND expires_at < `+now+`
			ORDER BY worker_id LIMIT 1)
			AND expires_at < `+now+`
		RETURNING `+leaseColumns, c.MinWorker, c.MaxWorker, sqlstore.NullString(c.Owner), modifier(c.TTL), c.ClockMillis))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, store.NoFreeWorker(c)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID %d: %w", l.WorkerID, err)
	}
	return l, nil
}

// RenewWorker implements [store.LeaseStore] in one UPDATE … RETURNING fenced
// by the generation.
func (s *Store) RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis, clockMillis int64) (store.Lease, error) {
	if err := store.ValidateRenew(workerID, ttl, highWaterMillis, clockMillis); err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	l, err := scanLease(s.db.QueryRowContext(ctx, `
		UPDATE leaf_worker_lease
		SET expires_at = strftime('%Y-%m-%d %H:%M:%f', 'now', ?3),
			high_water_ms = max(high_water_ms, ?4), reported_ms = ?5, updated_at = `+now+`
		WHERE worker_id = ?1 AND generation = ?2
		RETURNING `+leaseColumns, workerID, generation, modifier(ttl), highWaterMillis, clockMillis))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, fmt.Errorf("renew worker ID %d generation %d: %w", workerID, generation, store.ErrLeaseLost)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	return l, nil
}

// ReleaseWorker implements [store.LeaseStore].
func (s *Store) ReleaseWorker(ctx context.Context, workerID, generation, finalMarkMillis int64) error {
	res, err := s.db.ExecContext(ctx, `UPDATE leaf_worker_lease
		SET expires_at = `+epoch+`, updated_at = `+now+`,
		high_water_ms = CASE WHEN ?1 > 0 THEN ?1 ELSE high_water_ms END
		WHERE worker_id = ?2 AND generation = ?3`, finalMarkMillis, workerID, generation)
	if err != nil {
		return fmt.Errorf("release worker ID %d: %w", workerID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("release worker ID %d: %w", workerID, err)
	}
	if n == 0 {
		return fmt.Errorf("release worker ID %d generation %d: %w", workerID, generation, store.ErrLeaseLost)
	}
	return nil
}

// LiveHolders implements [store.LeaseStore].
func (s *Store) LiveHolders(ctx context.Context) ([]store.Holder, time.Time, error) {
	var nowText any
	if err := s.db.QueryRowContext(ctx, `SELECT `+now).Scan(&nowText); err != nil {
		return nil, time.Time{}, fmt.Errorf("list live worker ID holders: %w", err)
	}
	dbNow, err := leaseTime(nowText)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list live worker ID holders: now: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT worker_id, coalesce(owner, ''), reported_ms, updated_at, expires_at
		FROM leaf_worker_lease WHERE expires_at > ? ORDER BY worker_id`, dbNow.Format(leaseLayout))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list live worker ID holders: %w", err)
	}
	defer rows.Close()
	var out []store.Holder
	for rows.Next() {
		var (
			h                store.Holder
			written, expires any
		)
		if err := rows.Scan(&h.WorkerID, &h.Owner, &h.ClockMillis, &written, &expires); err != nil {
			return nil, time.Time{}, fmt.Errorf("list live worker ID holders: %w", err)
		}
		if h.WrittenAt, err = leaseTime(written); err != nil {
			return nil, time.Time{}, fmt.Errorf("list live worker ID holders: updated_at: %w", err)
		}
		if h.ExpiresAt, err = leaseTime(expires); err != nil {
			return nil, time.Time{}, fmt.Errorf("list live worker ID holders: expires_at: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("list live worker ID holders: %w", err)
	}
	return out, dbNow, nil
}

// modifier renders ttl as a strftime modifier, "+10.000 seconds".
func modifier(ttl time.Duration) string {
	return fmt.Sprintf("%+.3f seconds", float64(ttl.Milliseconds())/1000)
}

func scanLease(row *sql.Row) (store.Lease, error) {
	var (
		l              store.Lease
		expires, dbNow any
	)
	if err := row.Scan(&l.WorkerID, &l.Generation, &l.Owner, &l.HighWaterMillis, &expires, &dbNow, &l.ClockMillis); err != nil {
		return store.Lease{}, err
	}
	var err error
	if l.ExpiresAt, err = leaseTime(expires); err != nil {
		return store.Lease{}, fmt.Errorf("expires_at: %w", err)
	}
	if l.DBNow, err = leaseTime(dbNow); err != nil {
		return store.Lease{}, fmt.Errorf("now: %w", err)
	}
	return l, nil
}

// leaseTime converts a UTC 'YYYY-MM-DD HH:MM:SS.SSS' text (or a time the
// driver already parsed) to a time.Time in UTC.
func leaseTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case time.Time:
		return v.UTC(), nil
	case string:
		return time.Parse(leaseLayout, v)
	case []byte:
		return time.Parse(leaseLayout, string(v))
	}
	return time.Time{}, fmt.Errorf("unexpected %T", v)
}
