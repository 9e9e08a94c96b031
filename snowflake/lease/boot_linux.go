//go:build linux

package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// BootTime returns Linux's CLOCK_BOOTTIME (clock_gettime, a vDSO call): the time since boot
// including suspended time, never stepped. Go's monotonic clock is CLOCK_MONOTONIC on Linux,
// which stops while the host or VM is suspended. Should the call fail (it does not on Linux
// ≥ 2.6.39) it returns the largest duration, so every Deadline reads as expired: failing safe.
func BootTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 1<<63 - 1
	}
	return time.Duration(ts.Nano())
}
