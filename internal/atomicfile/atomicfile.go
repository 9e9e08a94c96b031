// Package atomicfile replaces small files so that readers and crashes see the old or the new
// content, never a torn one. It serves snowflake.FileHighWater, zkworker's cache file and
// segment.FileMarks.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces the file at path with data so that readers and crashes see either
// the old or the new content: it writes a temporary file in the same directory (created with
// mode 0o755 if missing), fsyncs it, renames it over path and fsyncs the directory. The file
// gets mode 0o644.
func Write(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
