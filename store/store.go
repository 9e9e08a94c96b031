// Package store holds the types and errors shared by the leaf_alloc stores.
//
// The drivers live in sub-packages, one per dialect, so that the pure cores
// (segment, snowflake) can depend on these types without importing a driver:
//
//	store/postgres  PostgreSQL via pgx/v5, UPDATE … RETURNING in one round trip
//	store/mysql     MySQL/MariaDB via go-sql-driver/mysql, UPDATE then SELECT in one transaction (as Leaf)
//	store/sqlite    embedded SQLite (pure Go, no cgo), the zero-setup default
//	store/dsn       parses a DSN and opens the matching store
//	store/storetest the conformance suite every store passes
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// FindChunk is the most names one statement of [Store.FindTags] or
// [Store.FindGroups] asks for; more names take more statements
// (MySQL allows at most 65,535 placeholders in a statement).
const FindChunk = 500

// Errors returned by every store. Drivers translate their own errors to these
// at the boundary; callers check them with errors.Is.
var (
	// ErrTagNotFound is returned by Allocate, Update, Delete and Fence when no
	// leaf_alloc row has the biz_tag.
	ErrTagNotFound = errors.New("store: biz tag not found")
	// ErrOverflow is returned by Allocate when max_id + step would pass the
	// int64 maximum (9223372036854775807); the row is left unchanged.
	ErrOverflow = errors.New("store: max_id + step overflows int64")
	// ErrBadStep is returned by Allocate when the row's step (or the
	// caller's custom step) is not positive, and by Create/Update for a
	// step < 1.
	ErrBadStep = errors.New("store: step must be positive")
	// ErrBadRow is returned by Create and Update for a biz_tag or description
	// that does not fit leaf_alloc (tag 1..128 characters, description up to
	// 256, valid UTF-8).
	ErrBadRow = errors.New("store: invalid leaf_alloc row")
	// ErrTagExists is returned by Create when the biz_tag already has a row.
	ErrTagExists = errors.New("store: biz tag already exists")
	// ErrBelowTombstone is matched by the *[TombstoneError] that Create
	// returns when the biz_tag was deleted with a higher max_id than the new
	// row's: IDs below that were handed out, and the new row would hand them
	// out again.
	ErrBelowTombstone = errors.New("store: biz tag was deleted with a higher max_id")
	// ErrBelowMark is returned by Allocate when the row's max_id is below
	// the caller's mark (its high-water mark: the highest max_id it
	// accepted), with both values; the row is left unchanged. The table
	// went back in time (a restored backup, a lagging replica promoted), and
	// the allocation, refused in the same UPDATE that would have made it,
	// burns no segment: one that carried max_id up to another server's
	// lower mark would let that server hand out IDs again
	// (docs/contract.md §2.6 rule 5).
	ErrBelowMark = errors.New("store: max_id is below the high-water mark")
	// ErrPermanent is wrapped (beside the driver's error) by a dialect's Open
	// when the server answered that the connection cannot work as
	// configured, so that retrying is pointless: the database does not exist
	// (PostgreSQL SQLSTATE 3D000, MySQL 1049) or the credentials were
	// refused (PostgreSQL 28P01 and 28000, MySQL 1044, 1045 and MariaDB's 1698). leaf-server exits
	// with it at start; it retries every other open error.
	ErrPermanent = errors.New("store: the database refused the connection (retrying will not help)")
)

// TombstoneError is Create's refusal of a row below the tombstone of its
// biz_tag: the last max_id the tag had when it was deleted through leaf-go
// (table leaf_tombstone, docs/contract.md §2.6 rule 8). It matches
// [ErrBelowTombstone].
type TombstoneError struct {
	// BizTag is the tag being created.
	BizTag string
	// MaxID is the new row's max_id, in IDs: below Tombstone.
	MaxID int64
	// Tombstone is the tag's max_id when it was deleted: every ID below it
	// may have been handed out.
	Tombstone int64
	// DeletedAt is when it was deleted (the database's clock), UTC.
	DeletedAt time.Time
}

func (e *TombstoneError) Error() string {
	return fmt.Sprintf("store: biz tag %q was deleted at max_id %d (%s): a new row at max_id %d would hand out IDs %d to %d again; "+
		"create it with max_id %d or more, or force it with a reason if none of those IDs is in use",
		e.BizTag, e.Tombstone, e.DeletedAt.UTC().Format(time.RFC3339), e.MaxID, e.MaxID, e.Tombstone-1, e.Tombstone)
}

// Is reports whether target is [ErrBelowTombstone].
func (e *TombstoneError) Is(target error) bool { return target == ErrBelowTombstone }

// Allocation is the result of one allocation transaction: the segment
// [MaxID-Step, MaxID) now belongs to the caller alone.
type Allocation struct {
	// BizTag is the tag the segment was reserved for.
	BizTag string
	// MaxID is the row's max_id after the update: the exclusive upper bound
	// of the reserved segment, in IDs.
	MaxID int64
	// Step is the number of IDs reserved by this transaction (the custom step
	// when one was given, otherwise the row's step).
	Step int64
	// DBStep is the row's step column as read in the same transaction, in IDs.
	// Leaf re-reads it on every load and uses it as the minimum step.
	DBStep int64
}

// Start returns the first ID of the reserved segment, MaxID-Step.
func (a Allocation) Start() int64 { return a.MaxID - a.Step }

// Row is one leaf_alloc row, as shown on Leaf's /db page.
type Row struct {
	BizTag      string    // biz_tag: the sequence's name, 1..128 characters
	MaxID       int64     // max_id: the exclusive upper bound of the last segment handed out
	Step        int64     // step: the configured (minimum) segment size, in IDs
	Description string    // description: free text up to 256 characters; "" is stored as NULL
	UpdateTime  time.Time // update_time: when the row last changed (set by the database), UTC
	// Ordered reports whether the tag has a row in leaf_ordered, leaf-go's own
	// table (migration 6): its IDs increase in real time across every server
	// (docs/contract.md §12). Create sets it in the same transaction as the
	// leaf_alloc row; Rows reads it in the same query; Delete removes it.
	Ordered bool
}

// TailReturn is a row of leaf_tail_return: the last unused tail a server
// gave back for a biz_tag on a graceful stop. leaf_alloc.max_id went from
// From down to To; IDs To..From-1 had never been handed out. Seq counts the
// returns of the tag, from 1.
type TailReturn struct {
	BizTag   string
	From, To int64
	Seq      int64
}

// ValidateTailReturn checks the arguments of [Store.ReturnTail]: 1 <= to <
// from and seq >= 1. The error wraps [ErrBadRow].
func ValidateTailReturn(from, to, seq int64) error {
	if to < 1 || to >= from || seq < 1 {
		return fmt.Errorf("%w: tail return from %d to %d, seq %d: want 1 <= to < from, seq >= 1", ErrBadRow, from, to, seq)
	}
	return nil
}

// Store is the whole contract of a leaf-go database: leaf_alloc (segment
// mode), leaf_group (date-grouped tags), the worker leases of the `sql`
// worker ID source ([LeaseStore]), engine detection and retry counts. It has
// three implementations (postgres, mysql, sqlite), each asserting
// `var _ store.Store = (*Store)(nil)`; all are safe for concurrent use.
// Every method is an ordinary one: no caller discovers a capability by type
// assertion, so a wrapper that forgot a method would not compile.
type Store interface {
	// Allocate runs, in one transaction, UPDATE leaf_alloc SET max_id =
	// max_id + step WHERE biz_tag = tag AND max_id >= mark and reads the
	// row back. step <= 0 means the row's own step (Leaf's
	// updateMaxIdAndGetLeafAlloc); step > 0 is a custom step (Leaf's
	// updateMaxIdByCustomStepAndGetLeafAlloc). mark is the caller's
	// high-water mark for the tag; mark <= 1 means none (every row
	// qualifies). The mark is checked in the UPDATE itself, so that no
	// rewind between a read and the write can slip a segment through.
	// Errors: [ErrTagNotFound], [ErrBelowMark], [ErrOverflow],
	// [ErrBadStep], or a driver error; the row is unchanged after each.
	Allocate(ctx context.Context, tag string, step, mark int64) (Allocation, error)
	// Tags lists every biz_tag in leaf_alloc (Leaf's getAllTags).
	Tags(ctx context.Context) ([]string, error)
	// Rows returns every row ordered by biz_tag, for the /db page, with
	// Ordered read from leaf_ordered in the same query.
	Rows(ctx context.Context) ([]Row, error)
	// FindTags maps the biz_tags among tags that have a leaf_alloc row to
	// whether each is ordered (a leaf_ordered row, read by a LEFT JOIN in
	// the same statement): the miss lookup of the segment generator, one
	// `SELECT … WHERE biz_tag IN (…)` per [FindChunk] names, so that its
	// cost grows with the names asked, not with the table. The keys are
	// the rows' biz_tags, exactly as stored.
	FindTags(ctx context.Context, tags []string) (map[string]bool, error)
	// MaxID reads the max_id of one row without changing it (the segment
	// generator reads it after [ErrBelowMark], to match it with another
	// server's tail return). Errors:
	// [ErrTagNotFound], or a driver error.
	MaxID(ctx context.Context, tag string) (int64, error)
	// Create inserts a row, and in the same transaction makes its
	// leaf_ordered row agree with r.Ordered (without, it removes a stale
	// one left by a plain SQL delete). maxID < 1 means 1 (Leaf's default).
	// When the tag has a tombstone (it was deleted through Delete), a row
	// below the tombstone's max_id is refused with a *[TombstoneError]; a
	// row at or above it removes the tombstone, in the same transaction.
	// Errors: [ErrTagExists] (checked first), [ErrBelowTombstone],
	// [ErrBadStep].
	Create(ctx context.Context, r Row) error
	// ForceCreate is Create that ignores the tag's tombstone and removes it:
	// for an operator who knows that no ID below the tombstone is in use
	// (admin "force" with a "reason", leafctl --force --reason; the caller
	// logs the audit line). It returns the tombstone's max_id it overrode,
	// 0 for none. Errors: as Create's, without [ErrBelowTombstone].
	ForceCreate(ctx context.Context, r Row) (overrode int64, err error)
	// Update sets the step (1..MaxStep IDs) and description of a row; max_id
	// is never touched. Errors: [ErrBadStep], [ErrTagNotFound].
	Update(ctx context.Context, tag string, step int64, description string) error
	// Fence raises max_id to at least minMaxID, never lowering it, and returns
	// the row afterwards (`leafctl tag fence` after a restore). Errors:
	// [ErrTagNotFound].
	Fence(ctx context.Context, tag string, minMaxID int64) (Row, error)
	// ReturnTail gives back the unused tail [to, from) of tag (a graceful
	// stop, issue 22 item 2): in one transaction, UPDATE leaf_alloc SET
	// max_id = to WHERE biz_tag = tag AND max_id = from, a compare-and-set
	// that any allocation after the caller's turns into a no-op, and, only
	// if it changed the row, the record of the return in leaf_tail_return
	// with sequence number seq, which must be one more than the tag's last
	// (1 for the first); a record whose seq moved on meanwhile rolls the
	// whole transaction back. It reports whether max_id was lowered. This is
	// the only statement that ever lowers max_id. Errors: [ErrBadRow] unless
	// 1 <= to < from and seq >= 1; a driver error.
	ReturnTail(ctx context.Context, tag string, from, to, seq int64) (bool, error)
	// TailReturns returns every record of leaf_tail_return (the last
	// return of each tag that had one), for the tag refresh.
	TailReturns(ctx context.Context) ([]TailReturn, error)
	// TailReturnOf returns the record of tag's last return; the zero
	// TailReturn (Seq 0) when it has none.
	TailReturnOf(ctx context.Context, tag string) (TailReturn, error)
	// Delete removes a row and its leaf_ordered row and, in the same
	// transaction, leaves its max_id in the tag's tombstone (raised, never
	// lowered), which Create checks.
	// Errors: [ErrTagNotFound].
	Delete(ctx context.Context, tag string) error
	// Groups returns every leaf_group declaration, ordered by biz_tag.
	Groups(ctx context.Context) ([]Group, error)
	// FindGroups returns the declarations of the names among tags that
	// have one, in no particular order (the miss lookup of grouped tags;
	// [FindChunk] names per statement).
	FindGroups(ctx context.Context, tags []string) ([]Group, error)
	// Now reads the database's clock (to the millisecond, UTC): the clock
	// a prune is checked against, so that a server whose own clock runs
	// ahead cannot prune a period other servers still serve.
	Now(ctx context.Context) (time.Time, error)
	// CreateGroup inserts a declaration. Errors: [ErrTagExists].
	CreateGroup(ctx context.Context, g Group) error
	// UpdateGroup sets time_zone, step, retention and description of a
	// declaration (grp, format and pruned_before are not changed here).
	// Errors: [ErrTagNotFound].
	UpdateGroup(ctx context.Context, g Group) error
	// RaisePrunedBefore sets pruned_before to key when key is later, never
	// lowering it, and returns the value afterwards. Errors:
	// [ErrTagNotFound].
	RaisePrunedBefore(ctx context.Context, tag, key string) (string, error)
	// DeleteGroup removes a declaration (its period rows stay). Errors:
	// [ErrTagNotFound].
	DeleteGroup(ctx context.Context, tag string) error

	// LeaseStore is the worker leases of the `sql` worker ID source
	// (table leaf_worker): leaf-server hands the store to
	// snowflake/sqllease as this one dependency.
	LeaseStore

	// Engine detects the database server behind the store (leaf-server
	// logs it at start; docs/contract.md §8). Errors: the database's.
	Engine(ctx context.Context) (Engine, error)
	// RetryCounts returns how many times the store re-ran a transaction
	// (or a statement) the engine refused since Open, per [RetryCauses]
	// name (leaf_store_retries_total); nil for a store that never re-runs
	// (sqlite). A fresh map on each call.
	RetryCounts() map[string]uint64
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the connections.
	Close() error
}
