package snowflake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaf-go/leaf/internal/atomicfile"
)

// HighWater persists the generator's time high-water mark: an instant that the generator has
// promised never to reach with an ID. Before it issues an ID at or past the stored mark, the
// generator stores a new mark (Settings.HighWaterWindow ahead of the clock); on start it loads
// the mark and issues nothing until its clock has reached it. So a restart after the clock was
// set back, or onto a host whose clock is behind, cannot repeat IDs of the earlier run — the
// hole that Leaf's SnowflakeIDGenImpl leaves open.
//
// Implementations: FileHighWater (a local file, the mark of a StaticSource), and every
// [Source]: zkworker.Worker (the ZooKeeper node's timestamp plus the local cache file) and
// sqllease.Lease (the lease row). Load returns the zero time when no mark was ever stored. Store is called with increasing marks, from one goroutine at a time; it may be slow
// (it runs only about once per window) but must be durable when it returns nil.
type HighWater interface {
	Load(ctx context.Context) (time.Time, error)
	Store(ctx context.Context, mark time.Time) error
}

// FileHighWater stores the high-water mark in a local file as decimal Unix milliseconds. Writes
// are atomic (temporary file in the same directory, fsync, rename, fsync of the directory), so a
// crash leaves the old or the new mark, never a torn one. It never lowers the stored mark. Safe
// for concurrent use within one process; two processes must not share a path (leaf-server locks
// its data directory so that two servers cannot).
type FileHighWater struct {
	path string

	mu sync.Mutex // guards stored
	// stored is the highest mark written or read, in Unix ms; writes below it are skipped.
	stored int64
}

var _ HighWater = (*FileHighWater)(nil)

// NewFileHighWater returns a FileHighWater at path. Nothing is read or written until Load or
// Store; the directory is created on the first Store.
func NewFileHighWater(path string) *FileHighWater {
	return &FileHighWater{path: path}
}

// Path returns the file's path.
func (f *FileHighWater) Path() string { return f.path }

// Load reads the mark. A missing file means no mark (zero time, nil error); an unreadable or
// malformed file is an error, so that a damaged file stops the start instead of silently
// dropping the restart protection. Load first removes the temporary files that a process
// killed inside a Store left next to the file (".<name>.tmp-<digits>", see
// atomicfile.RemoveTemps; never a file a Store still uses, nor any other file); failing to
// remove them is not an error, since they are never read.
func (f *FileHighWater) Load(ctx context.Context) (time.Time, error) {
	_, _ = atomicfile.RemoveTemps(f.path)
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read high-water file: %w", err)
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || ms < 0 {
		return time.Time{}, fmt.Errorf("high-water file %s: %q is not Unix milliseconds", f.path, strings.TrimSpace(string(b)))
	}
	f.mu.Lock()
	f.stored = max(f.stored, ms)
	f.mu.Unlock()
	return time.UnixMilli(ms), nil
}

// Store writes mark (truncated to the millisecond) unless a higher mark is already stored.
func (f *FileHighWater) Store(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	f.mu.Lock()
	defer f.mu.Unlock()
	if ms <= f.stored {
		return nil
	}
	if err := atomicfile.Write(f.path, []byte(strconv.FormatInt(ms, 10)+"\n")); err != nil {
		return err
	}
	f.stored = ms
	return nil
}
