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
const leaseColumns = `worker_id, generation, coalesce(owner, ''), high_water_ms, expires_at, now()`

// ClaimWorker implements [store.LeaseStore] in one UPDATE whose subquery picks
// the lowest expired row with FOR UPDATE SKIP LOCKED: concurrent claimers
// skip each other's rows instead of queueing on them, and get different IDs.
// Missing rows of 0..maxWorker are inserted first (ON CONFLICT DO NOTHING, in
// its own statement, only when some are missing). The claim, like
// RenewWorker and ReleaseWorker, is re-run on the errors Allocate retries.
func (s *Store) ClaimWorker(ctx context.Context, owner string, maxWorker int64, ttl time.Duration) (store.Lease, error) {
	if err := store.ValidateClaim(maxWorker, ttl); err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	if err := s.seedWorkers(ctx, maxWorker); err != nil {
		return store.Lease{}, err
	}
	var l store.Lease
	err := s.retry(ctx, func() (err error) {
		l, err = scanLease(s.pool.QueryRow(ctx, `
		UPDATE leaf_worker_lease
		SET owner = $2, generation = generation + 1,
			expires_at = now() + $3::bigint * interval '1 millisecond', updated_at = now()
		WHERE worker_id = (
			SELECT worker_id FROM leaf_worker_lease
			WHERE worker_id BETWEEN 0 AND $1 AND expires_at < now()
			ORDER BY worker_id LIMIT 1
			FOR UPDATE SKIP LOCKED)
		RETURNING `+leaseColumns, maxWorker, nullString(owner), ttl.Milliseconds()))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, store.NoFreeWorker(maxWorker, ttl)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("claim worker ID: %w", err)
	}
	return l, nil
}

// seedWorkers inserts the rows of 0..maxWorker that do not exist yet.
func (s *Store) seedWorkers(ctx context.Context, maxWorker int64) error {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM leaf_worker_lease WHERE worker_id BETWEEN 0 AND $1`, maxWorker).Scan(&n)
	if err != nil {
		return fmt.Errorf("claim worker ID: count rows: %w", err)
	}
	if n == maxWorker+1 {
		return nil
	}
	// DO NOTHING neither locks nor touches the rows that exist.
	_, err = s.pool.Exec(ctx, `
		INSERT INTO leaf_worker_lease (worker_id)
		SELECT g FROM generate_series(0, $1::integer) AS g
		ON CONFLICT (worker_id) DO NOTHING`, maxWorker)
	if err != nil {
		return fmt.Errorf("claim worker ID: insert rows 0..%d: %w", maxWorker, err)
	}
	return nil
}

// RenewWorker implements [store.LeaseStore] in one UPDATE … RETURNING fenced
// by the generation.
func (s *Store) RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis int64) (store.Lease, error) {
	if err := store.ValidateRenew(workerID, ttl, highWaterMillis); err != nil {
		return store.Lease{}, fmt.Errorf("renew worker ID %d: %w", workerID, err)
	}
	var l store.Lease
	err := s.retry(ctx, func() (err error) {
		l, err = scanLease(s.pool.QueryRow(ctx, `
		UPDATE leaf_worker_lease
		SET expires_at = now() + $3::bigint * interval '1 millisecond',
			high_water_ms = GREATEST(high_water_ms, $4::bigint), updated_at = now()
		WHERE worker_id = $1 AND generation = $2
		RETURNING `+leaseColumns, workerID, generation, ttl.Milliseconds(), highWaterMillis))
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
func (s *Store) ReleaseWorker(ctx context.Context, workerID, generation int64) error {
	var ct pgconn.CommandTag
	err := s.retry(ctx, func() (err error) {
		ct, err = s.pool.Exec(ctx, `
		UPDATE leaf_worker_lease SET expires_at = '1970-01-01 00:00:00+00', updated_at = now()
		WHERE worker_id = $1 AND generation = $2`, workerID, generation)
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

func scanLease(row pgx.Row) (store.Lease, error) {
	var l store.Lease
	if err := row.Scan(&l.WorkerID, &l.Generation, &l.Owner, &l.HighWaterMillis, &l.ExpiresAt, &l.DBNow); err != nil {
		return store.Lease{}, err
	}
	l.ExpiresAt, l.DBNow = l.ExpiresAt.UTC(), l.DBNow.UTC()
	return l, nil
}
