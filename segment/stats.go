package segment

import (
	"maps"
	"slices"
	"time"
)

// SegmentStats is one segment of a buffer, as in Leaf's /cache columns
// valueN, maxN, stepN. All values are in IDs.
type SegmentStats struct {
	// Value is the next ID the segment would hand out; Value == Max when it
	// is spent.
	Value int64
	// Max is the exclusive upper bound of the segment.
	Max int64
	// Step is the buffer's step when the segment was loaded.
	Step int64
}

// Idle is the number of IDs left in the segment, Max - Value.
func (s SegmentStats) Idle() int64 { return s.Max - s.Value }

// BufferStats is a snapshot of one tag's double buffer (Leaf's
// SegmentBufferView plus load history). Counters are since the generator
// started.
type BufferStats struct {
	// BizTag is the tag.
	BizTag string
	// InitOK is true once the first segment was loaded (Leaf's initOk).
	InitOK bool
	// NextReady is true when a prefetched next segment waits (Leaf's
	// nextReady).
	NextReady bool
	// Loading is true while an allocation is in flight.
	Loading bool
	// Pos is the index, 0 or 1, of the current segment in Segments (Leaf's
	// pos). Segments[1-Pos] is the next segment when NextReady, otherwise
	// the previous one (as Leaf shows it) or zero.
	Pos      int
	Segments [2]SegmentStats
	// Step is the current dynamic step and MinStep the DB step read by the
	// last load, in IDs.
	Step, MinStep int64
	// LastLoad is the Clock time of the last successful load (zero before
	// it); LastLoadLatency its duration on the real clock.
	LastLoad        time.Time
	LastLoadLatency time.Duration
	// LoadFailures counts failed loads; LastError is the last one's message
	// ("" if none). RetryAt is when the next load may start after a failure
	// (zero when not in backoff).
	LoadFailures int64
	LastError    string
	RetryAt      time.Time
	// Issued counts IDs handed out for the tag since the buffer was created.
	// Divide its growth by the time between two snapshots for a rate.
	Issued int64
	// Remaining counts IDs in memory that need no database round trip: the
	// idle part of the current segment plus the whole next segment. Divide
	// by the rate for the runway.
	Remaining int64
	// Refusing is true while the tag refuses segments below its high-water
	// mark ([ErrRewound]): the database went back in time and the tag gets no
	// new segment until max_id is fenced to at least HighWater. Segments
	// already in memory keep serving.
	Refusing bool
	// HighWater is the tag's high-water mark: the highest max_id accepted
	// for it, persisted with [Config.Marks] (0 when none).
	HighWater int64
	// Ordered is true for an ordered tag (docs/contract.md §12): no segment
	// is buffered; Segments[0] shows the last allocation (all handed out),
	// Step its size in IDs, Loading whether requests are being served, and
	// Remaining is 0.
	Ordered bool
	// Batches counts the allocations of an ordered tag that succeeded, one
	// database write each; Issued/Batches is the mean batch size. Waiting
	// is the number of its requests queued for the next allocation.
	Batches, Waiting int64
}

// Stats returns a snapshot of every buffer, sorted by tag. It locks each
// buffer briefly and is safe to call concurrently with Get.
func (g *Generator) Stats() []BufferStats {
	m := *g.cache.Load()
	// Sort the tags, not the snapshots: moving 16-byte strings instead of
	// the large structs halves the cost at 100,000 tags.
	tags := slices.Sorted(maps.Keys(m))
	out := make([]BufferStats, len(tags))
	for i, t := range tags {
		out[i] = m[t].stats()
	}
	return out
}

// EachStat calls f with a snapshot of every buffer, in no particular order,
// until f returns false. The *BufferStats is reused between calls: copy
// what you keep. Unlike [Generator.Stats] it neither sorts the tags nor
// holds every snapshot at once, so that a caller that folds the buffers
// into totals (the /metrics collector) costs no memory per tag. Like Stats,
// it locks each buffer briefly and is safe to call concurrently with Get.
func (g *Generator) EachStat(f func(*BufferStats) bool) {
	var st BufferStats
	for _, b := range *g.cache.Load() {
		st = b.stats()
		if !f(&st) {
			return
		}
	}
}
