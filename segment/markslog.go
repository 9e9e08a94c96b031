package segment

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/leaf-go/leaf/internal/atomicfile"
)

// LogMarks keeps the high-water marks of all tags in an append-only log: a
// header line, then one checksummed record per raised mark. A Store costs
// one record appended and one fsync, whatever the number of tags, where
// [FileMarks] rewrites every tag's mark; concurrent Stores are committed as
// a group (one write and one fsync for every record staged while the
// previous fsync ran). When the log outgrows twice the size of one record
// per tag (and [LogMarks.CompactBytes]), the next writer compacts it: a
// snapshot of the current marks, one record per tag, replaces the log
// atomically (temporary file, fsync, rename, fsync of the directory; see
// [atomicfile.Write]). Compaction costs O(tags) once per O(tags) records,
// so a Store stays O(1) amortized.
//
// Layout (docs/contract.md §2.6): the header line
// "leaf-go segment marks log v1\n", then records of
//
//	uint32 n (little endian): length of the payload, 9 to 16+4*128 bytes
//	uint32 CRC-32C (Castagnoli) of the 4 length bytes and the payload
//	payload: int64 max_id (little endian, >= 1), then the biz_tag (UTF-8)
//	     or: int64 -max_id (< 0), int64 seq (>= 1), then the biz_tag: a lowering
//
// A tag's mark is the highest max_id of its records since its last
// lowering record, which sets the mark to its max_id, raised or lowered, and
// records seq, the tail return the lowering belongs to ([LogMarks.Lower]).
// A version without lowering records reads one as damage: it refuses to
// start, or (at the end of the file) cuts it and then refuses the tag whose
// max_id lies below the mark, never the other way round. Crash safety: a record
// is acknowledged only after the fsync that follows its write, so a crash
// can damage only records that nobody was told about, and only at the end
// of the file. Load cuts such a torn tail (bytes after the last whole record
// with no whole record after them) and refuses a log with a damaged record
// followed by whole ones: that is not a crash but a changed file or a
// failing disk ([ErrMarksDamaged]). A failed write or fsync (a full disk) is
// cut off again before the next write, so the log never carries garbage
// between records.
//
// Upgrade: a <dir>/segment-marks.json written by [FileMarks] next to the log
// path is read by Load, merged (marks only rise) into a snapshot of the log,
// and renamed to segment-marks.json.imported once the log is durable.
//
// Safe for concurrent use within one process; two processes must not share
// a path (leaf-server locks its data directory).
type LogMarks struct {
	path string
	// jsonPath is the FileMarks file to import, "" for none.
	jsonPath string
	log      *slog.Logger

	// CompactBytes is the log size, in bytes, below which the log is never
	// compacted. Zero means [DefaultCompactBytes]. Set it before the first
	// Load or Store.
	CompactBytes int64

	mu sync.Mutex // guards every field below
	// opened is true once the log was read (and repaired) and file opened.
	opened bool
	file   *os.File
	// size is the length of the log's whole, durable records (the offset of
	// the next write); live is the size a compaction would write.
	size, live int64
	// markGroup is the group commit (marks known durable, staged, who
	// writes or compacts).
	markGroup
	// rets is the seq of the last lowering record of each tag that has
	// one ([LogMarks.Lower]); compaction keeps it.
	rets map[string]int64
	// writes and compactions count successful file writes, for tests.
	writes, compactions int
	// nextCompact is the size at which the next compaction is tried.
	nextCompact int64
	// buf is reused by the writer for appends (not for snapshots).
	buf []byte
}

var _ Marks = (*LogMarks)(nil)

// DefaultCompactBytes is [LogMarks.CompactBytes]'s default: 1 MiB.
const DefaultCompactBytes = 1 << 20

// ErrMarksDamaged is returned by [LogMarks.Load] and [ReadMarksLog] when the
// marks log has a damaged record in the middle (whole records follow it) or
// a bad header: not the torn tail a crash leaves.
var ErrMarksDamaged = errors.New("segment: high-water marks log damaged")

const (
	marksLogHeader = "leaf-go segment marks log v1\n"
	// recHead is the length and checksum in front of a payload.
	recHead = 8
	// minPayload and maxPayload bound a payload: max_id (and, in a
	// lowering record, seq) and 1 to 128 characters of up to 4 bytes.
	minPayload = 9
	maxPayload = 16 + 4*128
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NewLogMarks returns a [LogMarks] whose log is at path; legacyJSON, if not
// "", is the [FileMarks] file to import at Load (see the type's doc). log
// receives warnings (a torn tail cut, an import, a failed compaction); nil
// discards them. Nothing is read or written until Load or Store.
func NewLogMarks(path, legacyJSON string, log *slog.Logger) *LogMarks {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &LogMarks{path: path, jsonPath: legacyJSON, log: log, markGroup: markGroup{marks: map[string]int64{}, staged: map[string]int64{}},
		rets: map[string]int64{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Path returns the log's path.
func (f *LogMarks) Path() string { return f.path }

// Load reads the log (and imports the legacy JSON file, see the type's doc)
// and returns every mark, by tag; a copy the caller may keep. A missing log
// and JSON file mean no marks. A torn tail is cut from the file (and logged);
// a damaged log is [ErrMarksDamaged], with what to do, so that the start
// stops instead of silently dropping restore safety. Later calls return the
// marks in memory.
func (f *LogMarks) Load(ctx context.Context) (map[string]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.writing { // the writer owns file and opened
		f.cond.Wait()
	}
	if err := f.open(); err != nil {
		return nil, err
	}
	return maps.Clone(f.marks), nil
}

// Close closes the log file. Stores after Close reopen it.
func (f *LogMarks) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.writing {
		f.cond.Wait()
	}
	if f.file == nil {
		return nil
	}
	err := f.file.Close()
	f.file, f.opened = nil, false
	return err
}

// open reads the log once, repairs a torn tail, imports the legacy file and
// opens the log for appending. f.mu must be held and no write under way.
func (f *LogMarks) open() error {
	if f.opened {
		return nil
	}
	_, _ = atomicfile.RemoveTemps(f.path) // leftovers of a compaction killed midway; never read
	marks, rets, good, total, err := readMarksLog(f.path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return err
	}
	imported, importedTags := false, 0
	if f.jsonPath != "" {
		old, err := NewFileMarks(f.jsonPath).Load(context.Background())
		if err != nil {
			return fmt.Errorf("import %s: %w", f.jsonPath, err)
		}
		if _, statErr := os.Stat(f.jsonPath); statErr == nil {
			imported, importedTags = true, len(old)
			for t, v := range old {
				if v > marks[t] {
					marks[t] = v
				}
			}
		}
	}
	for t, v := range marks {
		f.marks[t] = max(f.marks[t], v)
	}
	for t, seq := range rets {
		f.rets[t] = seq
	}
	if missing || imported {
		// A fresh log, or one that must carry the imported marks: write a
		// snapshot before anything depends on it.
		if err := f.compact(); err != nil {
			return fmt.Errorf("write high-water marks log: %w", err)
		}
		if imported {
			if err := os.Rename(f.jsonPath, f.jsonPath+".imported"); err != nil {
				return fmt.Errorf("import %s: %w", f.jsonPath, err)
			}
			f.log.Info("segment: high-water marks imported into the log", "from", f.jsonPath, "to", f.path, "tags", importedTags)
		}
		f.opened = true
		return nil
	}
	file, err := os.OpenFile(f.path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open high-water marks log: %w", err)
	}
	if good < total {
		if err := cut(file, good); err != nil {
			_ = file.Close()
			return fmt.Errorf("cut the torn tail of %s at byte %d: %w", f.path, good, err)
		}
		f.log.Warn("segment: torn tail of the high-water marks log cut (a crash during a write)",
			"path", f.path, "kept_bytes", good, "cut_bytes", total-good)
	}
	f.file, f.size, f.opened = file, good, true
	f.live = liveSize(f.marks)
	f.nextCompact = max(f.compactBytes(), 2*f.live)
	return nil
}

func (f *LogMarks) compactBytes() int64 {
	if f.CompactBytes > 0 {
		return f.CompactBytes
	}
	return DefaultCompactBytes
}

// liveSize is the size of a snapshot of marks.
func liveSize(marks map[string]int64) int64 {
	n := int64(len(marksLogHeader))
	for t := range marks {
		n += recHead + 8 + int64(len(t))
	}
	return n
}

// cut truncates file to size and syncs it.
func cut(file *os.File, size int64) error {
	if err := file.Truncate(size); err != nil {
		return err
	}
	return file.Sync()
}

// Store raises the mark of tag to maxID and returns once a record holding it
// is durable, unless the durable mark is already at least maxID. Errors: the
// write's error (the mark stays staged and goes out with the next write), or
// the log's, if it could not be read.
func (f *LogMarks) Store(ctx context.Context, tag string, maxID int64) error {
	return f.StoreAll(ctx, map[string]int64{tag: maxID})
}

// StoreAll is Store for many tags at once, in one write. A mark below 1 or
// a tag that cannot be written (empty, longer than 128 characters, not
// UTF-8) is left out and named in the error, after the others are stored.
func (f *LogMarks) StoreAll(ctx context.Context, marks map[string]int64) error {
	var bad error
	for t, v := range marks {
		if t == "" || !utf8.ValidString(t) || utf8.RuneCountInString(t) > 128 || v < 1 {
			bad = fmt.Errorf("high-water mark %q = %d cannot be stored: tag must be 1 to 128 characters of UTF-8, mark >= 1", t, v)
			marks = maps.Clone(marks)
			for t, v := range marks {
				if t == "" || !utf8.ValidString(t) || utf8.RuneCountInString(t) > 128 || v < 1 {
					delete(marks, t)
				}
			}
			break
		}
	}
	if err := f.storeAll(marks); err != nil {
		return err
	}
	return bad
}

// storeAll is StoreAll for valid marks.
func (f *LogMarks) storeAll(marks map[string]int64) error {
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
		upto := f.seq
		err := f.open()
		var group map[string]int64
		if err == nil {
			group = f.staged
			f.staged = map[string]int64{}
			f.mu.Unlock()
			err = f.append(group)
			f.mu.Lock()
		}
		if err != nil {
			f.failed, f.failErr = upto, fmt.Errorf("write high-water marks: %w", err)
			for t, v := range group { // back to staged for the next write
				f.staged[t] = max(f.staged[t], v)
			}
		} else {
			f.writes++
			f.durable = upto
			for t, v := range group {
				if _, ok := f.marks[t]; !ok {
					f.live += recHead + 8 + int64(len(t))
				}
				f.marks[t] = max(f.marks[t], v)
			}
		}
		if err == nil && f.size >= f.nextCompact {
			// Everyone of this group is durable already: wake them, then
			// compact while still the writer.
			f.cond.Broadcast()
			f.compactTurn()
		}
		f.writing = false
		f.cond.Broadcast()
	}
}

// Lower sets the mark of tag to maxID, below (or above) the current one, and
// records seq, the number of the tail return it belongs to, in one lowering
// record; it returns once the record is durable. Only a graceful stop that
// gives a tail back (the returning server, before its compare-and-set) and a
// server applying another server's return call it ([Generator.ReturnTails]).
// Errors: a tag that cannot be written, maxID or seq below 1, or the write's.
func (f *LogMarks) Lower(ctx context.Context, tag string, maxID, seq int64) error {
	if tag == "" || !utf8.ValidString(tag) || utf8.RuneCountInString(tag) > 128 || maxID < 1 || seq < 1 {
		return fmt.Errorf("high-water mark %q = %d (return %d) cannot be lowered: tag must be 1 to 128 characters of UTF-8, mark and seq >= 1", tag, maxID, seq)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.writing {
		f.cond.Wait()
	}
	if err := f.open(); err != nil {
		return err
	}
	f.writing = true
	f.mu.Unlock()
	err := f.write(appendLowering(nil, tag, maxID, seq))
	f.mu.Lock()
	if err == nil {
		f.writes++
		if _, ok := f.marks[tag]; !ok {
			f.live += recHead + 16 + int64(len(tag))
		}
		f.marks[tag], f.rets[tag] = maxID, seq
	}
	f.writing = false
	f.cond.Broadcast()
	if err != nil {
		return fmt.Errorf("lower high-water mark: %w", err)
	}
	return nil
}

// Returns returns the seq of the last lowering record of each tag that has
// one ([LogMarks.Lower]); a copy. It reads the log first if Load did not.
func (f *LogMarks) Returns(ctx context.Context) (map[string]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.writing {
		f.cond.Wait()
	}
	if err := f.open(); err != nil {
		return nil, err
	}
	return maps.Clone(f.rets), nil
}

// append writes the records of group at the end of the log and fsyncs. On
// failure it cuts the file back to its last durable size, so that the next
// write does not follow garbage. Only the writer calls it, without f.mu.
func (f *LogMarks) append(group map[string]int64) error {
	b := f.buf[:0]
	for _, t := range slices.Sorted(maps.Keys(group)) {
		b = appendRecord(b, t, group[t])
	}
	f.buf = b
	return f.write(b)
}

// write appends b at the end of the log and fsyncs, as append. Only the
// writer calls it, without f.mu.
func (f *LogMarks) write(b []byte) error {
	_, err := f.file.WriteAt(b, f.size)
	if err == nil {
		err = f.file.Sync()
	}
	if err != nil {
		if cerr := cut(f.file, f.size); cerr != nil {
			// The file may now end in garbage: reopen and reread before
			// the next write, which then cuts the garbage as a torn tail.
			_ = f.file.Close()
			f.file, f.opened = nil, false
		}
		return err
	}
	f.size += int64(len(b))
	return nil
}

// compactTurn compacts the log; the caller is the writer and holds f.mu,
// which compactTurn releases while it writes. A failure is logged and the
// next attempt waits until the log has grown by half again.
func (f *LogMarks) compactTurn() {
	f.mu.Unlock()
	defer f.mu.Lock()
	if err := f.compact(); err != nil {
		f.nextCompact = f.size + f.size/2
		f.log.Warn("segment: high-water marks log not compacted; appends go on", "path", f.path, "size_bytes", f.size, "err", err)
	}
}

// compact writes a snapshot of f.marks over the log and reopens it. The
// caller is the one writer (or holds f.mu in open); f.marks is not changed
// meanwhile, since only the writer changes it.
func (f *LogMarks) compact() error {
	// Not f.buf: a snapshot is as large as all marks (about 20 bytes a
	// tag), and compactions are rare; kept for the appends, its buffer
	// would stay allocated for good (docs/architecture.md, "Memory per
	// tag").
	b := []byte(marksLogHeader)
	for _, t := range slices.Sorted(maps.Keys(f.marks)) {
		if seq := f.rets[t]; seq > 0 {
			b = appendLowering(b, t, f.marks[t], seq)
		} else {
			b = appendRecord(b, t, f.marks[t])
		}
	}
	if err := atomicfile.Write(f.path, b); err != nil {
		return err
	}
	file, err := os.OpenFile(f.path, os.O_WRONLY, 0)
	if err != nil {
		// The snapshot is durable; reopen at the next write.
		if f.file != nil {
			_ = f.file.Close()
		}
		f.file, f.opened = nil, false
		return err
	}
	if f.file != nil {
		_ = f.file.Close() // the replaced log: nothing left to write to it
	}
	f.file, f.size, f.live = file, int64(len(b)), int64(len(b))
	f.nextCompact = max(f.compactBytes(), 2*f.live)
	f.compactions++
	return nil
}

// appendRecord appends the record of (tag, maxID) to b.
func appendRecord(b []byte, tag string, maxID int64) []byte {
	n := 8 + len(tag)
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 0, 0, 0) // checksum, below
	b = binary.LittleEndian.AppendUint64(b, uint64(maxID))
	b = append(b, tag...)
	sum := crc32.Update(crc32.Checksum(b[start:start+4], castagnoli), castagnoli, b[start+recHead:])
	binary.LittleEndian.PutUint32(b[start+4:], sum)
	return b
}

// appendLowering appends the lowering record of (tag, maxID, seq) to b.
func appendLowering(b []byte, tag string, maxID, seq int64) []byte {
	n := 16 + len(tag)
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 0, 0, 0) // checksum, below
	b = binary.LittleEndian.AppendUint64(b, uint64(-maxID))
	b = binary.LittleEndian.AppendUint64(b, uint64(seq))
	b = append(b, tag...)
	sum := crc32.Update(crc32.Checksum(b[start:start+4], castagnoli), castagnoli, b[start+recHead:])
	binary.LittleEndian.PutUint32(b[start+4:], sum)
	return b
}

// parseRecord reads the record at the start of b: its tag, mark and length,
// and for a lowering record its seq (0 for a raising one). ok is false when
// b does not start with a whole, valid record.
func parseRecord(b []byte) (tag string, maxID, seq int64, n int, ok bool) {
	if len(b) < recHead+minPayload {
		return "", 0, 0, 0, false
	}
	size := int(binary.LittleEndian.Uint32(b))
	if size < minPayload || size > maxPayload || len(b) < recHead+size {
		return "", 0, 0, 0, false
	}
	payload := b[recHead : recHead+size]
	sum := crc32.Update(crc32.Checksum(b[:4], castagnoli), castagnoli, payload)
	if sum != binary.LittleEndian.Uint32(b[4:]) {
		return "", 0, 0, 0, false
	}
	maxID = int64(binary.LittleEndian.Uint64(payload))
	tag = string(payload[8:])
	if maxID < 0 && maxID != math.MinInt64 && size >= 17 { // a lowering
		maxID = -maxID
		seq = int64(binary.LittleEndian.Uint64(payload[8:]))
		tag = string(payload[16:])
		if seq < 1 {
			return "", 0, 0, 0, false
		}
	}
	if maxID < 1 || !utf8.ValidString(tag) || tag == "" {
		return "", 0, 0, 0, false
	}
	return tag, maxID, seq, recHead + size, true
}

// ReadMarksLog reads the marks log at path without changing it: every mark,
// by tag. A torn tail is ignored (a reader may meet a write in progress);
// a missing file is an error wrapping fs.ErrNotExist; a damaged log is
// [ErrMarksDamaged]. For tools and tests; the server uses [LogMarks.Load].
func ReadMarksLog(path string) (map[string]int64, error) {
	m, _, _, _, err := readMarksLog(path)
	return m, err
}

// readMarksLog reads the log at path: the marks, the seq of each tag's last
// lowering record (rets), the length of the whole records (good) and the
// file's length (total).
func readMarksLog(path string) (marks, rets map[string]int64, good, total int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return map[string]int64{}, map[string]int64{}, 0, 0, err
		}
		return nil, nil, 0, 0, fmt.Errorf("read high-water marks log: %w", err)
	}
	total = int64(len(b))
	if len(b) < len(marksLogHeader) || string(b[:len(marksLogHeader)]) != marksLogHeader {
		return nil, nil, 0, total, fmt.Errorf("%w: %s does not start with %q. %s", ErrMarksDamaged, path, marksLogHeader[:len(marksLogHeader)-1], marksAdvice)
	}
	marks, rets = map[string]int64{}, map[string]int64{}
	off := len(marksLogHeader)
	for off < len(b) {
		tag, v, seq, n, ok := parseRecord(b[off:])
		if !ok {
			break
		}
		switch {
		case seq > 0: // a lowering: the mark is v from here on
			marks[tag], rets[tag] = v, seq
		case v > marks[tag]:
			marks[tag] = v
		}
		off += n
	}
	if off < len(b) {
		// A torn tail holds no whole record after the damage; anything else
		// is damage in the middle.
		for at := off + 1; at < len(b); at++ {
			if _, _, _, _, ok := parseRecord(b[at:]); ok {
				return nil, nil, int64(off), total, fmt.Errorf("%w: %s: the record at byte %d is damaged and a whole record follows at byte %d, which a crash cannot leave (a changed file or a failing disk). %s",
					ErrMarksDamaged, path, off, at, marksAdvice)
			}
		}
	}
	return marks, rets, int64(off), total, nil
}

// marksAdvice tells the operator what to do with a damaged marks log.
const marksAdvice = "The server does not start with it, since the marks guard against handing out IDs twice after a restore of leaf_alloc (docs/contract.md §2.6). " +
	"To start: make sure leaf_alloc was not restored from a backup since this server last ran (its max_id values are not below what was handed out), " +
	"then move the file away; the marks are rebuilt from the max_id values at the first tag refresh"

// ReadMarksFile reads a server's restore marks at path without changing anything, whichever
// file it is: the marks log ([LogMarks], recognised by its header line) or the JSON file of
// [FileMarks] (an older server's segment-marks.json). A missing or unreadable file is an
// error: a guard that checks a new max_id against the marks must not pass for want of them.
// For tools (leafctl's --marks); the server uses [LogMarks.Load].
func ReadMarksFile(ctx context.Context, path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read high-water marks: %w", err)
	}
	if strings.HasPrefix(string(b), marksLogHeader) {
		return ReadMarksLog(path)
	}
	return NewFileMarks(path).Load(ctx)
}
