//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package atomicfile

import "errors"

// renameOpen is false: some of these systems (Windows) cannot rename an open file, and there
// is no lock to keep anyway.
const renameOpen = false

// CanLock reports whether this system has flock(2): not here, so TryLock always answers
// ErrLocked and callers that may go on without a lock check CanLock first.
const CanLock = false

// ErrLocked is returned by TryLock and lock(f, false): without flock every temporary file counts as in
// use, so RemoveTemps removes nothing.
var ErrLocked = errors.New("atomicfile: file locked")

// lock is a no-op for a Write (wait) and reports ErrLocked otherwise: this system has no flock
// here, so a leftover cannot be told from a file being written.
func lock(_ interface{ Fd() uintptr }, wait bool) error {
	if wait {
		return nil
	}
	return ErrLocked
}
