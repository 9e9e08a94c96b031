package etcdtest

import "syscall"

// procAttr puts a member in a process group of its own and has Linux kill it when the test
// process dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
