package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaf-go/leaf/store"
)

var _ store.LeaseStore = (*Store)(nil)

// leaseColumns is what every lease statement returns, in scanLease's order.
// now() is the transaction's start, the same instant expires_at was computed
// from.
const leaseColumns = `worker_id, generation, coalesce(owner, ''), high_water_ms, expires_at, now(), reported_ms`

// skipLocked is the locking clause of the claim's read.
const skipLocked = "FOR UPDATE SKIP LOCKED"

// ClaimWorker implements [store.LeaseStore]. One statement picks the lowest
// expired row of the range with FOR UPDATE SKIP LOCKED (concurrent claimers
// skip each other's rows instead of queueing on them) and updates it only if
// it is still expired with the generation read: where the lock does not hold
// (CockroachDB and YugabyteDB differ from PostgreSQL here) a claimer that
// lost the row changes nothing, and the claim is re-run, up to
// store.MaxClaimAttempts times. Missing rows of the range are inserted first
// (ON CONFLICT DO NOTHING, in its own statement, only when some are missing).
// Each statement, like RenewWorker's and ReleaseWorker's, is re-run on the
// errors Allocate retries.
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
		err := s.retry(ctx, func() (err error) {
			l, won, err = scanClaim(s.pool.QueryRow(ctx, `
			WITH pick AS (
				SELECT worker_id, generation FROM leaf_worker_lease
				WHERE worker_id BETWEEN $1 AND $2 AND expires_at < now()
				ORDER BY worker_id LIMIT 1 `+lock+`),
			upd AS (
				UPDATE leaf_worker_lease w
				SET owner = $3, generation = w.generation + 1, reported_ms = $5,
					expires_at = now() + $4::bigint * interval '1 millisecond', updated_at = now()
				FROM pick
				WHERE w.worker_id = pick.worker_id AND w.generation = pick.generation AND w.expires_at < now()
				RETURNING w.worker_id, w.generation, coalesce(w.owner, '') AS owner, w.high_water_ms, w.expires_at, w.reported_ms)
			SELECT pick.worker_id, upd.generation, upd.owner, upd.high_water_ms, upd.expires_at, now(), upd.reported_ms
			FROM pick LEFT JOIN upd ON true`,
				c.MinWorker, c.MaxWorker, nullString(c.Owner), c.TTL.Milliseconds(), c.ClockMillis))
			return err
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return store.Lease{}, store.NoFreeWorker(c)
		case err != nil:
			return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
		case won:
			return l, nil
		}
		// Another claimer took the row between the read and the write.
	}
	return store.Lease{}, store.Contended(c)
}

// scanClaim reads the claim's row: the picked worker ID and, when the
// guarded UPDATE changed it (won), the lease.
func scanClaim(row pgx.Row) (store.Lease, bool, error) {
	var (
		l                 store.Lease
		gen, hw, reported *int64
		owner             *string
		expires           *time.Time
	)
	if err := row.Scan(&l.WorkerID, &gen, &owner, &hw, &expires, &l.DBNow, &reported); err != nil {
		return store.Lease{}, false, err
	}
	if gen == nil {
		return store.Lease{}, false, nil
	}
	l.Generation, l.Owner, l.HighWaterMillis, l.ExpiresAt, l.ClockMillis = *gen, *owner, *hw, expires.UTC(), *reported
	l.DBNow = l.DBNow.UTC()
	return l, true, nil
}

// seedWorkers inserts the rows of minWorker..maxWorker that do not exist yet.
func (s *Store) seedWorkers(ctx context.Context, minWorker, maxWorker int64) error {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM leaf_worker_lease WHERE worker_id BETWEEN $1 AND $2`, minWorker, maxWorker).Scan(&n)
	if err != nil {
		return fmt.Errorf("claim worker ID: count rows: %w", err)
	}
	if n == maxWorker-minWorker+1 {
		return nil
	}
	// DO NOTHING neither locks nor touches the rows that exist.
	_, err = s.pool.Exec(ctx, `
		INSERT INTO leaf_worker_lease (worker_id)
		SELECT g FROM generate_series($1::integer, $2::integer) AS g
		ON CONFLICT (worker_id) DO NOTHING`, minWorker, maxWorker)
	if err != nil {
		return fmt.Errorf("claim worker ID: insert rows %d..%d: %w", minWorker, maxWorker, err)
	}
	return nil
}

// RenewWorker implements [store.LeaseStore] in one UPDATE … RETURNING fenced
// by the generation.
func (s *Store) RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis, clockMillis int64) (store.Lease, error) {
	if err := store.ValidateRenew(workerID, ttl, highWaterMillis, clockMillis); err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	var l store.Lease
	err := s.retry(ctx, func() (err error) {
		l, err = scanLease(s.pool.QueryRow(ctx, `
		UPDATE leaf_worker_lease
		SET expires_at = now() + $3::bigint * interval '1 millisecond',
			high_water_ms = GREATEST(high_water_ms, $4::bigint), reported_ms = $5, updated_at = now()
		WHERE worker_id = $1 AND generation = $2
		RETURNING `+leaseColumns, workerID, generation, ttl.Milliseconds(), highWaterMillis, clockMillis))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, fmt.Errorf("renew worker ID %d generation %d: %w", workerID, generation, store.ErrLeaseLost)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	return l, nil
}

// ReleaseWorker implements [store.LeaseStore].
func (s *Store) ReleaseWorker(ctx context.Context, workerID, generation, finalMarkMillis int64) error {
	var ct pgconn.CommandTag
	err := s.retry(ctx, func() (err error) {
		ct, err = s.pool.Exec(ctx, `
		UPDATE leaf_worker_lease SET expires_at = '1970-01-01 00:00:00+00', updated_at = now(),
			high_water_ms = CASE WHEN $3::bigint > 0 THEN $3::bigint ELSE high_water_ms END
		WHERE worker_id = $1 AND generation = $2`, workerID, generation, finalMarkMillis)
		return err
	})
	if err != nil {
		return fmt.Errorf("release worker ID %d: %w", workerID, err)
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("release worker ID %d generation %d: %w", workerID, generation, store.ErrLeaseLost)
	}
	return nil
}

// LiveHolders implements [store.LeaseStore].
func (s *Store) LiveHolders(ctx context.Context) ([]store.Holder, time.Time, error) {
	var (
		out []store.Holder
		now time.Time
	)
	err := s.retry(ctx, func() error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `SELECT worker_id, coalesce(owner, ''), reported_ms, updated_at, expires_at, now()
			FROM leaf_worker_lease WHERE expires_at > now() ORDER BY worker_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h store.Holder
			if err := rows.Scan(&h.WorkerID, &h.Owner, &h.ClockMillis, &h.WrittenAt, &h.ExpiresAt, &now); err != nil {
				return err
			}
			h.WrittenAt, h.ExpiresAt = h.WrittenAt.UTC(), h.ExpiresAt.UTC()
			out = append(out, h)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list live worker ID holders: %w", err)
	}
	if now.IsZero() {
		if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return nil, time.Time{}, fmt.Errorf("list live worker ID holders: %w", err)
		}
	}
	return out, now.UTC(), nil
}

func scanLease(row pgx.Row) (store.Lease, error) {
	var l store.Lease
	if err := row.Scan(&l.WorkerID, &l.Generation, &l.Owner, &l.HighWaterMillis, &l.ExpiresAt, &l.DBNow, &l.ClockMillis); err != nil {
		return store.Lease{}, err
	}
	l.ExpiresAt, l.DBNow = l.ExpiresAt.UTC(), l.DBNow.UTC()
	return l, nil
}
