package snowflake

import "time"

// NewAnchoredClockFrom returns an AnchoredClock that reads fake clocks: read gives the wall
// clock and the monotonic reading of one instant (time.Now in production), mono the monotonic
// reading alone, sleep waits. For tests only.
func NewAnchoredClockFrom(read func() (time.Time, time.Duration), mono func() time.Duration, sleep func(time.Duration)) *AnchoredClock {
	return newAnchoredClock(clockSource{read: read, mono: mono, sleep: sleep})
}
