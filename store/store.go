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
	"time"
)

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
)

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

// Store is what the server needs from a leaf_alloc database. It has three
// implementations (postgres, mysql, sqlite); all are safe for concurrent use.
type Store interface {
	// Allocate runs, in one transaction, UPDATE leaf_alloc SET max_id =
	// max_id + step WHERE biz_tag = tag and reads the row back. step <= 0
	// means the row's own step (Leaf's updateMaxIdAndGetLeafAlloc); step > 0
	// is a custom step (Leaf's updateMaxIdByCustomStepAndGetLeafAlloc).
	// Errors: [ErrTagNotFound], [ErrOverflow], [ErrBadStep], or a driver error.
	Allocate(ctx context.Context, tag string, step int64) (Allocation, error)
	// Tags lists every biz_tag in leaf_alloc (Leaf's getAllTags).
	Tags(ctx context.Context) ([]string, error)
	// Rows returns every row ordered by biz_tag, for the /db page, with
	// Ordered read from leaf_ordered in the same query.
	Rows(ctx context.Context) ([]Row, error)
	// MaxID reads the max_id of one row without changing it (the segment
	// generator's restore check before an allocation). Errors:
	// [ErrTagNotFound], or a driver error.
	MaxID(ctx context.Context, tag string) (int64, error)
	// Create inserts a row, and with r.Ordered its leaf_ordered row in the
	// same transaction (without, it removes a stale one left by a plain SQL
	// delete). maxID < 1 means 1 (Leaf's default). Errors: [ErrTagExists],
	// [ErrBadStep].
	Create(ctx context.Context, r Row) error
	// Update sets the step (1..MaxStep IDs) and description of a row; max_id
	// is never touched. Errors: [ErrBadStep], [ErrTagNotFound].
	Update(ctx context.Context, tag string, step int64, description string) error
	// Fence raises max_id to at least minMaxID, never lowering it, and returns
	// the row afterwards (`leafctl tag fence` after a restore). Errors:
	// [ErrTagNotFound].
	Fence(ctx context.Context, tag string, minMaxID int64) (Row, error)
	// Delete removes a row and its leaf_ordered row in one transaction.
	// Errors: [ErrTagNotFound].
	Delete(ctx context.Context, tag string) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the connections.
	Close() error
}
