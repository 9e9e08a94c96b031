//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package atomicfile

import "errors"

// renameOpen is false: some of these systems (Windows) cannot rename an open file, and there
// is no lock to keep anyway.
const renameOpen = false

// errLocked is returned by lock(f, false): without flock every temporary file counts as in
// use, so RemoveTemps removes nothing.
var errLocked = errors.New("atomicfile: file locked")

// lock is a no-op for a Write (wait) and reports errLocked otherwise: this system has no flock
// here, so a leftover cannot be told from a file being written.
func lock(_ interface{ Fd() uintptr }, wait bool) error {
	if wait {
		return nil
	}
	return errLocked
}
