//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package atomicfile

import (
	"errors"
	"syscall"
)

// renameOpen: Write renames its temporary file before closing it, so that its lock covers the
// file until the name is gone.
const renameOpen = true

// CanLock reports whether this system has flock(2): TryLock locks here.
const CanLock = true

// ErrLocked is returned by TryLock and lock(f, false) when another open file holds the lock.
var ErrLocked = errors.New("atomicfile: file locked")

// lock takes an exclusive flock on f, released when f is closed or its process dies. With
// wait it blocks until the lock is free; without, it returns ErrLocked at once.
func lock(f interface{ Fd() uintptr }, wait bool) error {
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		default:
			return err
		}
	}
}
