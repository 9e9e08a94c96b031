package store

import (
	"context"
	"time"
)

// Group is one row of leaf_group, the declaration of a date-grouped tag
// (docs/contract.md §10): its sequence restarts every period and comes
// from one ordinary leaf_alloc row per period, named "<BizTag>:<key>"
// (key yyyyMMdd, yyyyMM or yyyy). leaf_group is leaf-go's own table;
// leaf_alloc stays Leaf's.
type Group struct {
	// BizTag is the grouped tag's name, 1..119 characters (its period rows'
	// names must fit leaf_alloc's 128).
	BizTag string
	// Grp is "day", "month" or "year".
	Grp string
	// TimeZone is an IANA zone name ("UTC", "Asia/Shanghai"): periods start
	// at local midnight there.
	TimeZone string
	// Format is the ID template (package bizno), e.g. ORD{yyyyMMdd}{seq:6}.
	Format string
	// Step is the step of every new period row, in IDs (1..MaxStep).
	Step int64
	// Retention is how many periods (the current one included) `prune`
	// keeps when asked without a date; 0 keeps all.
	Retention int64
	// PrunedBefore is the key of the oldest period that may still be
	// served: older periods were pruned and are never created again by any
	// server. "" means none was pruned.
	PrunedBefore string
	// Description is free text up to 256 characters.
	Description string
}

// GroupStore reads and writes leaf_group. Every store (postgres, mysql,
// sqlite) is one; all are safe for concurrent use.
type GroupStore interface {
	// Groups returns every declaration, ordered by biz_tag.
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
}
