package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux the harness runs on).
const clockTick = 10 * time.Millisecond

// pidOf finds the one running process started from bin with a --listen
// flag (a server started by servertest), or 0 when there is not exactly one.
func pidOf(bin string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	found := 0
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) < 2 || args[0] != bin || !strings.Contains(string(b), "--listen") {
			continue
		}
		if found != 0 {
			return 0
		}
		found, _ = strconv.Atoi(filepath.Base(d))
	}
	return found
}

// cpuTime returns the user plus system CPU time pid has used (0 when it is
// gone or pid is 0).
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name in parentheses: state is field 3,
	// utime 14 and stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * clockTick
}
