package snowflake

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// CheckLayoutChange reports whether a generator may start issuing IDs of layout next where
// earlier runs issued IDs of layout old, without repeating one of them. It is pure: the caller
// keeps the record of the old layout (leaf-server keeps it in its data directory) and passes
// the instants.
//
// floor is the time high-water mark the new generator loaded ([Stats].Floor; zero when none),
// now the clock reading at start. Every ID of old carries a millisecond at or below
// max(floor, now): the high-water mark lies ahead of every ID issued, and an ID issued after
// the mark was stored carries a millisecond the clock has already passed. So the change is safe
// when the smallest ID of next at now lies above the largest ID of old at that millisecond.
//
// Returns nil when the layouts are the same (same epoch in whole milliseconds, same widths),
// when old's epoch lies after max(floor, now) (it issued nothing), and when every new ID lies
// above the old ones: an earlier epoch with the same widths, or a change such as 41/10/12 to
// 40/11/12 that shifts the time field left. Errors:
//   - [ErrLayoutChange], with the smallest new and the largest old ID, when new IDs could
//     repeat old ones: a later epoch, narrower worker or sequence fields with the same time
//     field, or a floor far enough ahead that the old layout may have reached the new IDs. An
//     old layout that has run out (max(floor, now) at or past old.End()) counts as having
//     issued every ID, so any change is refused.
//   - [ErrInvalidLayout] when the widths of old or next are not valid (a damaged record).
//   - [ErrTimeRange] when now lies outside next.
func CheckLayoutChange(old, next Layout, floor, now time.Time) error {
	if err := old.validWidths(); err != nil {
		return fmt.Errorf("old layout: %w", err)
	}
	if err := next.validWidths(); err != nil {
		return fmt.Errorf("new layout: %w", err)
	}
	if old.EpochMillis() == next.EpochMillis() && old.TimeBits == next.TimeBits &&
		old.WorkerBits == next.WorkerBits && old.SequenceBits == next.SequenceBits {
		return nil
	}
	newMin, err := next.Compose(now.UnixMilli(), 0, 0)
	if err != nil {
		return fmt.Errorf("new layout: %w", err)
	}
	last := max(floor.UnixMilli(), now.UnixMilli())
	oldMax, err := old.Compose(last, old.MaxWorker(), old.MaxSequence())
	switch {
	case errors.Is(err, ErrTimeRange) && last < old.EpochMillis():
		oldMax = -1 // the old layout's time had not begun: it issued nothing
	case err != nil:
		oldMax = math.MaxInt64 // past the old layout's end: assume the worst
	}
	if newMin <= oldMax {
		return fmt.Errorf("%w (smallest new ID %d, largest old ID up to %d)", ErrLayoutChange, newMin, oldMax)
	}
	return nil
}
