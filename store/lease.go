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
	// MinWorker..MaxWorker is held by an unexpired lease. The error message
	// names the range; a lease frees up at most its TTL after its holder
	// stopped renewing.
	ErrNoFreeWorker = errors.New("store: no free worker ID")
	// ErrLeaseLost is returned by RenewWorker and ReleaseWorker when the
	// row's generation is no longer the caller's: another node has claimed
	// the worker ID since (after the caller's lease expired in the database),
	// or the row is gone. The caller must stop issuing IDs with that worker
	// ID for good; the generation is the fencing token.
	ErrLeaseLost = errors.New("store: worker ID lease lost (generation changed)")
	// ErrBadLease is returned by the lease methods for arguments outside
	// their ranges: a worker range outside 0..MaxLeaseWorker or empty, a TTL
	// outside [MinLeaseTTL, MaxLeaseTTL], a negative worker ID, high-water
	// mark or clock reading.
	ErrBadLease = errors.New("store: invalid lease argument")
)

// Limits of the lease methods.
const (
	// MaxLeaseWorker is the largest MaxWorker ClaimWorker accepts: 65535,
	// 16 worker bits. Rows are inserted for every ID of the range, so the
	// bound keeps a mistaken layout from filling the table.
	MaxLeaseWorker = 1<<16 - 1
	// MinLeaseTTL is the shortest lease the stores grant: 100 ms. The
	// databases keep milliseconds; anything shorter would expire before its
	// holder heard of it.
	MinLeaseTTL = 100 * time.Millisecond
	// MaxLeaseTTL is the longest lease the stores grant: 24 h.
	MaxLeaseTTL = 24 * time.Hour
	// MaxClaimAttempts bounds how often ClaimWorker re-runs its claim when
	// the guarded UPDATE changed no row (another claimer took the row it
	// picked between its read and its write: what happens when the lock the
	// read relies on does not lock, as TiDB's SKIP LOCKED). Each lost race
	// means another claimer got a worker ID, so 100 covers 100 concurrent
	// claimers of one range; past it ClaimWorker fails with ErrClaimContended.
	MaxClaimAttempts = 100
)

// ErrClaimContended is returned by ClaimWorker when every one of
// MaxClaimAttempts attempts lost its row to another claimer. Nothing was
// claimed; trying again later is safe.
var ErrClaimContended = errors.New("store: worker ID claim kept losing races to other claimers")

// Claim is what ClaimWorker is asked for.
type Claim struct {
	// Owner is written into the owner column for operators, at most 255
	// bytes; "" writes NULL. It plays no part in fencing.
	Owner string
	// MinWorker and MaxWorker bound the worker IDs claimed, inclusive:
	// 0 <= MinWorker <= MaxWorker <= MaxLeaseWorker (leaf-server's
	// --worker-id-min/--worker-id-max, so that clusters sharing a layout but
	// not a database get disjoint IDs).
	MinWorker, MaxWorker int64
	// TTL is the lease granted, MinLeaseTTL..MaxLeaseTTL of database time.
	TTL time.Duration
	// ClockMillis is the claimer's own wall clock when it sent the claim,
	// Unix ms (0: none): written into reported_ms, for the peer clock check
	// of later claimers (LiveHolders).
	ClockMillis int64
}

// Lease is the state of one leaf_worker_lease row as a claim or a renewal
// left it. All instants are the database's clock (PostgreSQL now(), MySQL
// UTC_TIMESTAMP(3), SQLite strftime('now')), in UTC, to the millisecond; a
// node must not compare them with its own clock (use DBNow for the offset).
type Lease struct {
	// WorkerID is the claimed worker ID, in the claimed range.
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
	// ClockMillis is reported_ms: the holder's own wall clock, Unix ms, as it
	// sent the claim or renewal that wrote the row (0: none reported).
	ClockMillis int64
}

// Holder is one live lease row (expires_at after the database's now) as
// LiveHolders reads it: who holds the worker ID and the wall clock it last
// reported.
type Holder struct {
	// WorkerID is the held worker ID.
	WorkerID int64
	// Owner is the owner column ("" for NULL).
	Owner string
	// ClockMillis is the holder's wall clock, Unix ms, when it sent the
	// claim or renewal that last wrote the row; 0 when it reported none (a
	// server of an older leaf-go).
	ClockMillis int64
	// WrittenAt is updated_at: the database's clock when that statement ran.
	WrittenAt time.Time
	// ExpiresAt is expires_at, database clock: the instant from which
	// another node may claim the worker ID unless the holder renews first.
	ExpiresAt time.Time
}

// HighWater returns HighWaterMillis as a time, the zero time for 0.
func (l Lease) HighWater() time.Time {
	if l.HighWaterMillis <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(l.HighWaterMillis).UTC()
}

// ValidateClaim checks ClaimWorker's arguments: 0 <= MinWorker <= MaxWorker
// <= MaxLeaseWorker, TTL in [MinLeaseTTL, MaxLeaseTTL], ClockMillis >= 0 and
// an owner of at most 255 bytes. The error wraps [ErrBadLease].
func ValidateClaim(c Claim) error {
	if c.MinWorker < 0 || c.MaxWorker > MaxLeaseWorker || c.MinWorker > c.MaxWorker {
		return fmt.Errorf("%w: worker ID range %d..%d not within 0..%d", ErrBadLease, c.MinWorker, c.MaxWorker, MaxLeaseWorker)
	}
	if c.ClockMillis < 0 {
		return fmt.Errorf("%w: clock reading %d ms is negative", ErrBadLease, c.ClockMillis)
	}
	if len(c.Owner) > 255 {
		return fmt.Errorf("%w: owner is %d bytes, at most 255", ErrBadLease, len(c.Owner))
	}
	return validateTTL(c.TTL)
}

// ValidateRenew checks RenewWorker's arguments: a worker ID in
// 0..MaxLeaseWorker, a TTL in [MinLeaseTTL, MaxLeaseTTL], a high-water mark
// and a clock reading >= 0. The error wraps [ErrBadLease].
func ValidateRenew(workerID int64, ttl time.Duration, highWaterMillis, clockMillis int64) error {
	if workerID < 0 || workerID > MaxLeaseWorker {
		return fmt.Errorf("%w: worker ID %d not in [0, %d]", ErrBadLease, workerID, MaxLeaseWorker)
	}
	if highWaterMillis < 0 {
		return fmt.Errorf("%w: high-water mark %d ms is negative", ErrBadLease, highWaterMillis)
	}
	if clockMillis < 0 {
		return fmt.Errorf("%w: clock reading %d ms is negative", ErrBadLease, clockMillis)
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
func NoFreeWorker(c Claim) error {
	return fmt.Errorf("claim worker ID: %w: all %d IDs %d..%d are leased; a lease frees up %v after its holder stops renewing, or widen the range (--worker-id-min/--worker-id-max, the layout's worker bits)",
		ErrNoFreeWorker, c.MaxWorker-c.MinWorker+1, c.MinWorker, c.MaxWorker, c.TTL)
}

// Contended returns [ErrClaimContended] wrapped with the range; shared by
// the dialects.
func Contended(c Claim) error {
	return fmt.Errorf("claim worker ID in %d..%d: %w (%d attempts)", c.MinWorker, c.MaxWorker, ErrClaimContended, MaxClaimAttempts)
}

// MissingWorkers returns the IDs in minWorker..maxWorker that are not in
// have (sorted or not), ascending: the rows ClaimWorker inserts before it
// claims. Shared by the dialects.
func MissingWorkers(minWorker, maxWorker int64, have []int64) []int64 {
	seen := make([]bool, maxWorker-minWorker+1)
	for _, id := range have {
		if id >= minWorker && id <= maxWorker {
			seen[id-minWorker] = true
		}
	}
	var out []int64
	for i, ok := range seen {
		if !ok {
			out = append(out, minWorker+int64(i))
		}
	}
	return out
}

// LeaseStore is what the `sql` worker ID source needs from a database; every
// [Store] is one (it embeds it). snowflake/sqllease
// consumes an interface of the same shape. Safe for concurrent use.
//
// A worker ID is free when its row's expires_at is before the database's
// now. Rows for the claimed range are inserted on the first claim that finds
// any missing (the range comes from the layout and the flags at run time),
// after which every claim is a locking read of existing rows.
type LeaseStore interface {
	// ClaimWorker claims the lowest free worker ID in c.MinWorker..c.MaxWorker:
	// it bumps the generation, writes the owner and reported_ms, and sets
	// expires_at to the database's now + c.TTL. Concurrent claimers get
	// different IDs even where the locking read does not lock (TiDB's SKIP
	// LOCKED): the UPDATE re-checks that the row is still expired with the
	// generation read, and the claim is re-run when it changed no row.
	// Errors: [ErrNoFreeWorker], [ErrClaimContended], [ErrBadLease], or a
	// driver error.
	ClaimWorker(ctx context.Context, c Claim) (Lease, error)
	// RenewWorker sets expires_at to the database's now + ttl, raises
	// high_water_ms to highWaterMillis (never lowers it) and writes
	// clockMillis (the holder's wall clock as it sends, Unix ms) into
	// reported_ms, only while the row's generation is still generation.
	// Errors: [ErrLeaseLost], [ErrBadLease], or a driver error (the lease may
	// or may not have been renewed).
	RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis, clockMillis int64) (Lease, error)
	// ReleaseWorker sets expires_at to the past (the Unix epoch) while the
	// generation matches, so the worker ID is free at once. A finalMarkMillis
	// above 0 also sets high_water_ms to exactly it, lowering it if need be:
	// the holder's last issued millisecond + 1 at a graceful stop (issue 15
	// item 6), so that the next holder need not wait out the mark stored ahead
	// of the clock; 0 keeps high_water_ms. Errors: [ErrLeaseLost], or a driver
	// error.
	ReleaseWorker(ctx context.Context, workerID, generation, finalMarkMillis int64) error
	// LiveHolders returns every row whose lease has not expired at the
	// database's now (all worker IDs, whatever range), lowest worker ID
	// first, and that now: the peers of the clock check at start.
	LiveHolders(ctx context.Context) ([]Holder, time.Time, error)
}
