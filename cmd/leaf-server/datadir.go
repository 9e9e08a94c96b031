package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/leaf-go/leaf/internal/atomicfile"
)

// lockFileName is the file in the data dir whose lock marks the dir as taken.
const lockFileName = "LOCK"

// errDataDirInUse is returned by lockDataDir when another process holds the
// data dir's lock.
var errDataDirInUse = errors.New("data dir in use by another leaf-server")

// writesDataDir reports whether the server keeps state in DataDir: the
// SQLite file of the default DSN, segment mode's high-water marks, the
// static worker ID's time high-water file, and, with snowflake mode on
// whatever the worker ID source, the layout record (snowflake-layout.json)
// that refuses an epoch or layout change that could repeat IDs
// (docs/contract.md §3.5): every worker ID source needs that record, not
// only the static one, or a snowflake-only server restarted with a later
// --epoch-ms repeats IDs. Only a server with both modes off never touches
// it.
func (c Config) writesDataDir() bool {
	return c.SegmentEnabled || c.SnowflakeEnabled
}

// lockDataDir takes the exclusive lock of dir, creating dir (mode 0o755) and
// dir/LOCK when missing, and writes this process's PID into LOCK for the
// error message of the next one. The lock is flock(2) on LOCK: the kernel
// drops it when the process dies, so a kill -9 leaves no stale lock (LOCK
// itself stays, with the dead PID, and is taken over). Two servers sharing a
// dir would overwrite each other's high-water marks (segment.LogMarks
// compacts its log by replacing it; snowflake.FileHighWater replaces its
// file). Errors: errDataDirInUse naming the
// dir and, when LOCK tells it, the holder's PID; or the error of creating or
// locking LOCK. release
// drops the lock. On systems without flock (atomicfile.CanLock is false; see
// internal/atomicfile/lock_other.go) the dir is not locked.
func lockDataDir(dir string) (release func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open data dir lock: %w", err)
	}
	// Without flock (atomicfile.CanLock false) the dir is not locked, and
	// keeping servers apart is the operator's job.
	if err := tryLock(f); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "process " + strconv.Itoa(pid)
			}
		}
		_ = f.Close() // only read for the holder's PID; the lock error says what failed
		if errors.Is(err, atomicfile.ErrLocked) {
			abs, aerr := filepath.Abs(dir)
			if aerr != nil {
				abs = dir
			}
			return nil, fmt.Errorf("%w: %s is locked by %s (%s); two servers must not share a --data-dir: give each its own, or stop the other first",
				errDataDirInUse, abs, holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The PID is only for the message above: no fsync, and a failed write
	// (a full disk) leaves the lock held and the message without a PID.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil
}

// tryLock is atomicfile.TryLock where the system has flock, nil elsewhere.
func tryLock(f *os.File) error {
	if !atomicfile.CanLock {
		return nil
	}
	return atomicfile.TryLock(f)
}
