package segment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/leaf-go/leaf/internal/atomicfile"
)

// Marks persists the per-tag high-water marks of restore safety
// (docs/contract.md §2.6):
// for each biz_tag, the highest max_id of a segment the generator accepted.
// The generator loads them once in New and stores a tag's new mark after
// every accepted allocation, before any ID of that segment is handed out; a
// segment that starts below the mark is refused ([ErrRewound]).
//
// [LogMarks] keeps them in an append-only log in the server's data directory
// (leaf-server's segment-marks.log); [FileMarks] in one JSON file rewritten
// whole, which cannot lower a mark. Without [Config.Marks] the generator keeps
// them in memory only. Every method may be called concurrently with the
// others.
type Marks interface {
	// Load returns every stored mark, by biz_tag: an empty map when nothing
	// was ever stored, an error when the stored marks cannot be read (New
	// then fails rather than silently dropping restore safety). The
	// generator calls it once, in New, and keeps the map.
	Load(ctx context.Context) (map[string]int64, error)
	// Store raises the mark of tag to maxID, in IDs; it must be durable
	// when Store returns nil. The generator calls it after every accepted
	// allocation, with the segment's max_id, and serves no ID of the
	// segment until it returned nil; an error refuses the segment.
	Store(ctx context.Context, tag string, maxID int64) error
	// StoreAll is Store for many tags at once (a tag refresh raising the
	// marks to the max_id values it read). A mark below the stored one must
	// leave it unchanged. On error the raised marks still hold in memory.
	StoreAll(ctx context.Context, marks map[string]int64) error
	// Lower sets the mark of tag to maxID even below the stored one, and
	// records seq, the number of the tail return (store.TailReturn) that
	// allows it; durable when it returns nil. Only the tail return of a
	// graceful stop and the applying of another server's return call it
	// (docs/contract.md §2.6 rule 9). An implementation that cannot lower returns an
	// error, and the generator then neither gives tails back nor accepts
	// another server's.
	Lower(ctx context.Context, tag string, maxID, seq int64) error
	// Returns returns, by biz_tag, the seq of the last Lower of each tag.
	Returns(ctx context.Context) (map[string]int64, error)
}

// errNoLower is FileMarks' answer to Lower.
var errNoLower = errors.New("segment: the JSON marks file cannot lower a mark")

// FileMarks keeps the marks of all tags in one JSON file, an object mapping
// biz_tag to its mark as a decimal string (strings because marks may pass
// 2^53, where JSON tools lose digits):
//
//	{"marks":{"order":"4001","short_link":"120001"}}
//
// Every write replaces the whole file atomically (temporary file in the same
// directory, fsync, rename, fsync of the directory), so a crash leaves the
// old or the new content, never a torn one. Marks are never lowered.
// Concurrent Stores are committed as a group: while one write is under way,
// the marks that arrive are staged and the next write carries all of them,
// so many tags loading at once cost a few fsyncs, not one each. Safe for
// concurrent use within one process; two processes must not share a path
// (leaf-server locks its data directory so that two servers cannot).
type FileMarks struct {
	path string

	mu sync.Mutex // guards every field below
	// markGroup is the group commit (marks known durable, staged, who writes).
	markGroup
	// writes counts file writes, for tests of the grouping.
	writes int
	// sorted (the tags of the last write, sorted) and buf (its bytes) are
	// reused by the next write; only the one writer (writing set) uses them.
	sorted []string
	buf    []byte
}

var _ Marks = (*FileMarks)(nil)

// marksFile is the JSON layout of a [FileMarks] file.
type marksFile struct {
	Marks map[string]string `json:"marks"`
}

// NewFileMarks returns a [FileMarks] at path. Nothing is read or written until
// Load or Store; the directory is created on the first Store.
func NewFileMarks(path string) *FileMarks {
	f := &FileMarks{path: path, markGroup: markGroup{marks: map[string]int64{}, staged: map[string]int64{}}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Path returns the file's path.
func (f *FileMarks) Path() string { return f.path }

// Load reads the file. A missing file means no marks (an empty map, nil
// error); an unreadable or malformed file is an error, so that a damaged
// file stops the start instead of silently dropping restore safety. The
// result is a copy the caller may keep.
//
// Load first removes the temporary files that a process killed inside a
// write left next to the file (".<name>.tmp-<digits>", see
// [atomicfile.RemoveTemps]; never a file a write still uses, nor any other
// file). Failing to remove them is not an error: they are never read.
func (f *FileMarks) Load(ctx context.Context) (map[string]int64, error) {
	_, _ = atomicfile.RemoveTemps(f.path)
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read high-water marks: %w", err)
	}
	var mf marksFile
	if err := json.Unmarshal(b, &mf); err != nil {
		return nil, fmt.Errorf("high-water marks file %s: %w%s", f.path, err, damagedHint(f.path))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for tag, s := range mf.Marks {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("high-water marks file %s: mark of %q is %q, not an integer%s", f.path, tag, s, damagedHint(f.path))
		}
		f.marks[tag] = max(f.marks[tag], v)
	}
	return maps.Clone(f.marks), nil
}

// Lower implements [Marks]: the JSON file of earlier versions cannot lower a
// mark; the server uses [LogMarks].
func (f *FileMarks) Lower(ctx context.Context, tag string, maxID, seq int64) error {
	return errNoLower
}

// Returns implements [Marks]: FileMarks never lowers, so it has none.
func (f *FileMarks) Returns(ctx context.Context) (map[string]int64, error) {
	return map[string]int64{}, nil
}

// Store raises the mark of tag to maxID and returns once a file holding it is
// durable, unless the durable mark is already at least maxID. Errors: the
// write's error (the mark stays staged and goes out with the next write).
func (f *FileMarks) Store(ctx context.Context, tag string, maxID int64) error {
	return f.StoreAll(ctx, map[string]int64{tag: maxID})
}

// StoreAll is Store for many tags at once, in one write.
func (f *FileMarks) StoreAll(ctx context.Context, marks map[string]int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	mine := f.stage(marks)
	if mine == 0 {
		return nil
	}
	for {
		if done, err := f.turn(mine); done {
			return err
		}
		// Write for the whole group: everything staged so far.
		upto := f.seq
		next := maps.Clone(f.marks)
		for t, v := range f.staged {
			next[t] = max(next[t], v)
		}
		f.mu.Unlock()
		err := f.write(next)
		f.mu.Lock()
		f.writing = false
		f.writes++
		if err != nil {
			f.failed, f.failErr = upto, fmt.Errorf("write high-water marks: %w", err)
		} else {
			f.marks, f.durable = next, upto
			for t, v := range f.staged {
				if next[t] >= v {
					delete(f.staged, t)
				}
			}
		}
		f.cond.Broadcast()
	}
}

// write replaces the file with marks, durably. The caller is the one
// writer. The sorted tags of the last write are reused when marks holds
// exactly those tags (marks only ever gain tags, so this is the common
// case); otherwise they are sorted again.
func (f *FileMarks) write(marks map[string]int64) error {
	same := len(f.sorted) == len(marks)
	for i := 0; same && i < len(f.sorted); i++ {
		_, same = marks[f.sorted[i]]
	}
	if !same {
		f.sorted = slices.Sorted(maps.Keys(marks))
	}
	f.buf = appendMarks(f.buf[:0], marks, f.sorted)
	return atomicfile.Write(f.path, f.buf)
}

// appendMarks appends the file's bytes for marks to b: the bytes
// json.MarshalIndent(marksFile, "", "  ") and a newline give (keys sorted,
// values as decimal strings), written directly, without encoding/json's
// reflection and sorting, because the whole file is rewritten on every
// group of loads and grows with the number of tags.
// TestAppendMarksMatchesEncodingJSON checks that the bytes are the same.
//
// tags are the keys of marks, sorted.
func appendMarks(b []byte, marks map[string]int64, tags []string) []byte {
	if len(marks) == 0 {
		return append(b, "{\n  \"marks\": {}\n}\n"...)
	}
	b = append(b, "{\n  \"marks\": {\n"...)
	for i, t := range tags {
		b = append(b, "    "...)
		b = appendJSONString(b, t)
		b = append(b, ": \""...)
		b = strconv.AppendInt(b, marks[t], 10)
		b = append(b, '"')
		if i < len(tags)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return append(b, "  }\n}\n"...)
}

// appendJSONString appends s as encoding/json writes it: printable ASCII
// other than the characters it escapes (", \\, <, >, &) is copied; any other
// string goes through json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// damagedHint says what to do about the damaged marks file at path (issue
// 16 item 9: the refusal used to end at the parse error).
func damagedHint(path string) string {
	return fmt.Sprintf(". The file is damaged, and starting without it would drop restore safety, so the start stops. "+
		"Restore it from a backup of this data dir; or, if leaf_alloc has not gone back in time (no restored backup, "+
		"no failover to a lagging replica) since this server last ran, move it aside (mv %s %s.damaged) and start "+
		"again: the marks are rebuilt from leaf_alloc's max_id at the first tag refresh (docs/operations.md \"Restore runbook\")",
		path, path)
}
