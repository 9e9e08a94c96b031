//go:build !linux && !darwin

package lease

import "time"

// BootTime is the fallback where no boot clock is wired in (Windows, the BSDs, …): the wall
// clock, as time since 1970. It counts suspended time, which is what a Deadline needs from it,
// but it can be stepped: a wall clock stepped back during a suspend would hide the suspend
// from this reading (the wall check of Deadline sees the same clock). Linux and macOS read a
// real boot clock.
func BootTime() time.Duration {
	return time.Duration(time.Now().UnixNano())
}
