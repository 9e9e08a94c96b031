package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of the worker ID lease methods (ClaimWorker, RenewWorker,
// ReleaseWorker), the same on every dialect. They implement the `sql` worker
// ID source of docs/contract.md §3.6.
var (
	// ErrNoFreeWorker is returned by ClaimWorker when every worker ID in
	// 0..maxWorker is held by an unexpired lease. The error message names the
	// range; a lease frees up at most its TTL after its holder stopped
	// renewing.
	ErrNoFreeWorker = errors.New("store: no free worker ID")
	// ErrLeaseLost is returned by RenewWorker and ReleaseWorker when the
	// row's generation is no longer the caller's: another node has claimed
	// the worker ID since (after the caller's lease expired in the database),
	// or the row is gone. The caller must stop issuing IDs with that worker
	// ID for good; the generation is the fencing token.
	ErrLeaseLost = errors.New("store: worker ID lease lost (generation changed)")
	// ErrBadLease is returned by the lease methods for arguments outside
	// their ranges: maxWorker outside 0..MaxLeaseWorker, a TTL outside
	// [MinLeaseTTL, MaxLeaseTTL], a negative worker ID or high-water mark.
	ErrBadLease = errors.New("store: invalid lease argument")
)

// Limits of the lease methods.
const (
	// MaxLeaseWorker is the largest maxWorker ClaimWorker accepts: 65535,
	// 16 worker bits. Rows are inserted for every ID up to maxWorker, so the
	// bound keeps a mistaken layout from filling the table.
	MaxLeaseWorker = 1<<16 - 1
	// MinLeaseTTL is the shortest lease the stores grant: 100 ms. The
	// databases keep milliseconds; anything shorter would expire before its
	// holder heard of it.
	MinLeaseTTL = 100 * time.Millisecond
	// MaxLeaseTTL is the longest lease the stores grant: 24 h.
	MaxLeaseTTL = 24 * time.Hour
)

// Lease is the state of one leaf_worker_lease row as a claim or a renewal
// left it. All instants are the database's clock (PostgreSQL now(), MySQL
// UTC_TIMESTAMP(3), SQLite strftime('now')), in UTC, to the millisecond; a
// node must not compare them with its own clock (use DBNow for the offset).
type Lease struct {
	// WorkerID is the claimed worker ID, 0..maxWorker.
	WorkerID int64
	// Generation is the fencing token: bumped by every claim of the row, so
	// the first claim of a worker ID gets 1. Renewals and releases must
	// present it; a stale one gets [ErrLeaseLost].
	Generation int64
	// Owner is what the claimer wrote into the owner column (for operators;
	// it plays no part in fencing).
	Owner string
	// HighWaterMillis is the row's high_water_ms, Unix milliseconds: no ID
	// of this worker ID was issued at or past it by earlier holders, so a new
	// holder must issue nothing below it. 0 when never set.
	HighWaterMillis int64
	// ExpiresAt is expires_at: the database instant from which another node
	// may claim the worker ID, DBNow + TTL.
	ExpiresAt time.Time
	// DBNow is the database's clock when the statement ran.
	DBNow time.Time
}

// HighWater returns HighWaterMillis as a time, the zero time for 0.
func (l Lease) HighWater() time.Time {
	if l.HighWaterMillis <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(l.HighWaterMillis).UTC()
}

// ValidateClaim checks ClaimWorker's arguments: maxWorker in
// 0..MaxLeaseWorker and ttl in [MinLeaseTTL, MaxLeaseTTL]. The error wraps
// [ErrBadLease].
func ValidateClaim(maxWorker int64, ttl time.Duration) error {
	if maxWorker < 0 || maxWorker > MaxLeaseWorker {
		return fmt.Errorf("%w: max worker ID %d not in [0, %d]", ErrBadLease, maxWorker, MaxLeaseWorker)
	}
	return validateTTL(ttl)
}

// ValidateRenew checks RenewWorker's arguments: a worker ID in
// 0..MaxLeaseWorker, a TTL in [MinLeaseTTL, MaxLeaseTTL] and a high-water
// mark >= 0. The error wraps [ErrBadLease].
func ValidateRenew(workerID int64, ttl time.Duration, highWaterMillis int64) error {
	if workerID < 0 || workerID > MaxLeaseWorker {
		return fmt.Errorf("%w: worker ID %d not in [0, %d]", ErrBadLease, workerID, MaxLeaseWorker)
	}
	if highWaterMillis < 0 {
		return fmt.Errorf("%w: high-water mark %d ms is negative", ErrBadLease, highWaterMillis)
	}
	return validateTTL(ttl)
}

func validateTTL(ttl time.Duration) error {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return fmt.Errorf("%w: TTL %v not in [%v, %v]", ErrBadLease, ttl, MinLeaseTTL, MaxLeaseTTL)
	}
	return nil
}

// NoFreeWorker returns [ErrNoFreeWorker] wrapped with the range that was
// searched and what to do about it; shared by the dialects so that they say
// the same.
func NoFreeWorker(maxWorker int64, ttl time.Duration) error {
	return fmt.Errorf("claim worker ID: %w: all %d IDs 0..%d are leased; a lease frees up %v after its holder stops renewing, or widen the layout's worker bits",
		ErrNoFreeWorker, maxWorker+1, maxWorker, ttl)
}

// MissingWorkers returns the IDs in 0..maxWorker that are not in have (sorted
// or not), ascending: the rows ClaimWorker inserts before it claims. Shared
// by the dialects.
func MissingWorkers(maxWorker int64, have []int64) []int64 {
	seen := make([]bool, maxWorker+1)
	for _, id := range have {
		if id >= 0 && id <= maxWorker {
			seen[id] = true
		}
	}
	var out []int64
	for id, ok := range seen {
		if !ok {
			out = append(out, int64(id))
		}
	}
	return out
}

// LeaseStore is what the `sql` worker ID source needs from a database; the
// postgres, mysql and sqlite stores implement it. snowflake/sqllease
// consumes an interface of the same shape. Safe for concurrent use.
//
// A worker ID is free when its row's expires_at is before the database's
// now. Rows for 0..maxWorker are inserted on the first claim that finds any
// missing (the range comes from the layout at run time), after which every
// claim is a locking read of existing rows.
type LeaseStore interface {
	// ClaimWorker claims the lowest free worker ID in 0..maxWorker in one
	// transaction: it bumps the generation, writes owner, and sets expires_at
	// to the database's now + ttl. Concurrent claimers get different IDs.
	// Errors: [ErrNoFreeWorker], [ErrBadLease], or a driver error.
	ClaimWorker(ctx context.Context, owner string, maxWorker int64, ttl time.Duration) (Lease, error)
	// RenewWorker sets expires_at to the database's now + ttl and raises
	// high_water_ms to highWaterMillis (never lowers it), only while the
	// row's generation is still generation. Errors: [ErrLeaseLost], [ErrBadLease],
	// or a driver error (the lease may or may not have been renewed).
	RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis int64) (Lease, error)
	// ReleaseWorker sets expires_at to the past (the Unix epoch) while the
	// generation matches, so the worker ID is free at once. Errors:
	// [ErrLeaseLost], or a driver error.
	ReleaseWorker(ctx context.Context, workerID, generation int64) error
}
