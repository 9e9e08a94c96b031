// Package atomicfile replaces small files so that readers and crashes see the old or the new
// content, never a torn one. It serves snowflake.FileHighWater, zkworker's cache file and
// segment.FileMarks.
//
// A process killed inside Write leaves its temporary file behind (".<name>.tmp-<digits>" next
// to the target); RemoveTemps, called when the target is loaded, removes such leftovers.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Write replaces the file at path with data so that readers and crashes see either
// the old or the new content: it writes a temporary file ".<name>.tmp-<digits>" in the same
// directory (created with mode 0o755 if missing), fsyncs it, renames it over path and fsyncs
// the directory. The file gets mode 0o644. While it writes, Write holds an exclusive lock on
// the temporary file (flock, where the system has it), which tells RemoveTemps that the file
// is in use; a Write killed midway leaves the file, and the kernel drops the lock.
func Write(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := createLocked(dir, tempPrefix(path))
	if err != nil {
		return err
	}
	// Removing the temporary file is best effort (and a no-op after a
	// successful rename); RemoveTemps sweeps what a failure leaves. On the
	// error paths below the first error is the one to report, so the
	// closing of the abandoned file is not checked.
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if renameOpen {
		// Rename before Close: the lock lasts until the temporary name is gone.
		if err := os.Rename(tmp.Name(), path); err != nil {
			_ = tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
	} else {
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			return err
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // opened read-only: Sync reports what matters
	return d.Sync()
}

// createLocked creates a temporary file in dir named prefix plus random digits and locks it.
// A RemoveTemps running in between creation and lock may have removed the name; the file is
// then created again (RemoveTemps runs when a target is loaded, so a retry is rare; the bound
// only stops a loop against a directory swept without pause).
func createLocked(dir, prefix string) (*os.File, error) {
	for range 100 {
		tmp, err := os.CreateTemp(dir, prefix+"*")
		if err != nil {
			return nil, err
		}
		if err := lock(tmp, true); err != nil {
			_ = tmp.Close() // empty and abandoned: the lock error is the one to report
			_ = os.Remove(tmp.Name())
			return nil, err
		}
		if sameFile(tmp, tmp.Name()) {
			return tmp, nil
		}
		_ = tmp.Close() // empty, and removed by RemoveTemps before the lock was taken
	}
	return nil, fmt.Errorf("atomicfile: temporary files in %s keep disappearing", dir)
}

// tempPrefix is the start of the names of path's temporary files: ".<name>.tmp-".
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// isTemp reports whether name (a base name) is one of the temporary files of a target whose
// temporary names start with prefix: the prefix followed by one or more decimal digits, as
// os.CreateTemp makes them.
func isTemp(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// RemoveTemps removes the temporary files that Write left next to path when its process died
// mid-write: the entries of path's directory named ".<name>.tmp-<digits>" that no running
// Write holds (a Write in progress, in this process or another, keeps its file). path itself
// and every other file are never touched. It returns the paths it removed; a missing directory
// removes nothing and is no error. On systems without flock (see lock_other.go) it removes
// nothing, since it cannot tell a file being written from a leftover. Safe for concurrent use
// with Write on the same path.
func RemoveTemps(path string) ([]string, error) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := tempPrefix(path)
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTemp(e.Name(), prefix) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		ok, err := removeUnlocked(name)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, name)
		}
	}
	return removed, errors.Join(errs...)
}

// removeUnlocked removes the file name unless a Write holds its lock. It takes the lock
// itself first, so that a Write that created the file but has not locked it yet finds the
// name gone (createLocked then creates another).
func removeUnlocked(name string) (bool, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // renamed or removed meanwhile
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }() // opened read-only, only to take the lock
	if err := lock(f, false); err != nil {
		if errors.Is(err, ErrLocked) {
			return false, nil // a Write is using it
		}
		return false, err
	}
	if !sameFile(f, name) {
		return false, nil // the name now belongs to another file
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// sameFile reports whether name still refers to the open file f.
func sameFile(f *os.File, name string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(name)
	return err == nil && os.SameFile(a, b)
}

// TryLock takes an exclusive flock(2) on f without waiting: ErrLocked when
// another open file, in this or any process, holds it. Closing f, or the
// death of the process, releases it, so a kill -9 leaves no stale lock. On
// systems without flock (CanLock false) it answers ErrLocked.
func TryLock(f *os.File) error { return lock(f, false) }
