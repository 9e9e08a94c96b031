package store

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
