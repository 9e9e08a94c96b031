//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package main

import "os"

// canLock: the data dir is not locked on this system.
const canLock = false

// tryLock does nothing on systems without flock: the data dir is not
// locked there, and keeping servers apart is the operator's job.
func tryLock(*os.File) error { return nil }
