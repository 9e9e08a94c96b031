//go:build unix && !linux

package etcdtest

import "syscall"

// procAttr puts a member in a process group of its own. Only Linux has a parent-death
// signal: elsewhere a member outlives a test process that was killed (the test's cleanup
// stops it otherwise).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
