package store

import (
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"
)

// Limits of a leaf_alloc row, from Leaf's MySQL schema.
const (
	// MaxTagLen is the longest biz_tag, in characters (varchar(128)).
	MaxTagLen = 128
	// MaxDescriptionLen is the longest description, in characters
	// (varchar(256)).
	MaxDescriptionLen = 256
	// MaxStep is the largest step the step column holds (int(11), a signed
	// 32-bit integer), in IDs.
	MaxStep = math.MaxInt32
)

// ValidateRow checks the fields Create and Update write: a biz_tag of 1 to
// MaxTagLen characters of valid UTF-8, a step in [1, MaxStep] ([ErrBadStep]
// otherwise) and a description of at most MaxDescriptionLen characters. MaxID
// is not checked; Create treats values below 1 as 1.
func ValidateRow(r Row) error {
	if err := ValidateTag(r.BizTag); err != nil {
		return err
	}
	if err := ValidateMaxID(r.MaxID); err != nil {
		return err
	}
	if r.Step < 1 || r.Step > MaxStep {
		return fmt.Errorf("%w: %d is outside [1, %d]", ErrBadStep, r.Step, MaxStep)
	}
	if !utf8.ValidString(r.Description) || utf8.RuneCountInString(r.Description) > MaxDescriptionLen {
		return fmt.Errorf("%w: description must be valid UTF-8 of at most %d characters", ErrBadRow, MaxDescriptionLen)
	}
	return nil
}

// ValidateTag checks that tag is 1 to MaxTagLen characters of valid UTF-8,
// what the biz_tag column holds.
func ValidateTag(tag string) error {
	if tag == "" || !utf8.ValidString(tag) || utf8.RuneCountInString(tag) > MaxTagLen {
		return fmt.Errorf("%w: biz tag must be 1 to %d characters of UTF-8", ErrBadRow, MaxTagLen)
	}
	for _, c := range tag {
		if unicode.IsControl(c) {
			// The HTTP routes refuse such keys, so the tag could never be
			// served.
			return fmt.Errorf("%w: biz tag has control character %U", ErrBadRow, c)
		}
	}
	return nil
}

// MaxFence is the highest max_id Create and Fence accept: it leaves room for
// at least one more segment of the largest step, so that a tag is never set
// up to fail every allocation with [ErrOverflow].
const MaxFence = MaxAllowedID - MaxStep

// ValidateMaxID checks a max_id given by an operator (Create, Fence):
// 1..MaxFence. Errors: [ErrOverflow].
func ValidateMaxID(maxID int64) error {
	if maxID > MaxFence {
		return fmt.Errorf("%w: max_id %d leaves no room for a segment (at most %d)", ErrOverflow, maxID, int64(MaxFence))
	}
	return nil
}

// MaxAllowedID is the largest value max_id may reach, math.MaxInt64. The
// allocation UPDATE refuses ([ErrOverflow]) a step that would pass it.
const MaxAllowedID = math.MaxInt64

// GuardMark returns the value the dialects bind for the guard max_id >=
// mark of their allocating UPDATE: mark itself, or math.MinInt64 for a mark
// <= 1 (none), so that every row qualifies, even one below 1 (whose segment
// the caller cuts at 1).
func GuardMark(mark int64) int64 {
	if mark <= 1 {
		return math.MinInt64
	}
	return mark
}

// Refusal explains an allocation whose guarded UPDATE changed no row, from
// the row read back afterwards: exists reports whether a row was found, maxID
// and rowStep are its max_id and step, step is the caller's step argument
// (<= 0 means the row's own) and mark its high-water mark (<= 1: none). It
// returns, wrapped with the tag, [ErrTagNotFound] when there is no row,
// [ErrBadStep] when the row's step is not positive, [ErrBelowMark] when
// max_id is below the mark, [ErrOverflow] when max_id + step would pass
// MaxAllowedID, and nil when the row now admits the allocation (it changed
// in between; the caller may retry). Shared by the dialects so that they
// classify identically.
func Refusal(tag string, exists bool, maxID, rowStep, step, mark int64) error {
	switch {
	case !exists:
		return fmt.Errorf("allocate %q: %w", tag, ErrTagNotFound)
	case rowStep <= 0:
		return fmt.Errorf("allocate %q: %w: row step is %d", tag, ErrBadStep, rowStep)
	case maxID < GuardMark(mark):
		return fmt.Errorf("allocate %q: %w: max_id %d, mark %d", tag, ErrBelowMark, maxID, mark)
	}
	if step <= 0 {
		step = rowStep
	}
	if maxID > MaxAllowedID-step {
		return fmt.Errorf("allocate %q: %w: max_id %d + step %d", tag, ErrOverflow, maxID, step)
	}
	return nil
}
