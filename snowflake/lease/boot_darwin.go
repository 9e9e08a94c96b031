//go:build darwin

package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// BootTime returns macOS's CLOCK_MONOTONIC (clock_gettime(3)): it "continues to increment
// while the system is asleep" (Apple's man page; LLVM D74341 switched libc++'s steady_clock
// for that reason) and is never stepped. Go's own monotonic clock on macOS does not count
// sleep. Should the call fail it returns the largest duration, so every Deadline reads as
// expired: failing safe.
func BootTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 1<<63 - 1
	}
	return time.Duration(ts.Nano())
}
