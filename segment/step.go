package segment

import "time"

// nextStep returns the step of a load, in IDs, by Leaf's dynamic-step rule
// (SegmentIDGenImpl.updateSegmentFromDb; docs/contract.md §2.4): 0, meaning
// the row's own step, when first is set (the first load of a tag, or its
// first prefetch: no earlier prefetch to time). Otherwise, from prev, the
// step of the last load, and sinceLast, the time since the last prefetch:
//
//   - sinceLast < cfg.GrowWindow (15 min): doubled, while twice prev stays
//     <= cfg.MaxStep (1,000,000), else kept;
//   - cfg.GrowWindow <= sinceLast < cfg.ShrinkWindow (30 min): kept;
//   - sinceLast >= cfg.ShrinkWindow: halved, unless half of it would fall
//     below minStep, the DB step read by the last load; then kept.
//
// Deliberately unlike Leaf, a step below minStep (an operator raised the
// step column) is then raised to it, and the result is at least 1. cfg must
// have its defaults filled in.
func nextStep(first bool, prev, minStep int64, sinceLast time.Duration, cfg Config) int64 {
	if first {
		return 0
	}
	step := prev
	switch {
	case sinceLast < cfg.GrowWindow:
		if step <= cfg.MaxStep/2 {
			step *= 2
		}
	case sinceLast < cfg.ShrinkWindow:
	default:
		if step/2 >= minStep {
			step /= 2
		}
	}
	return max(step, minStep, 1)
}
