//go:build unix

package segment_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time used so far by the whole process, user
// plus system, over all its threads.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
