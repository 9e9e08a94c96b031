package segment

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// segment is one reserved range [start, max) (Leaf's Segment). The bounds are
// immutable; used counts take calls, so it can pass size but never wraps in
// practice (2^63 calls) and an ID outside [start, max) is never returned.
type segment struct {
	// used counts takes; every take writes it. It sits alone on the first
	// cache line of the segment and the read-mostly fields below on the
	// second, so that under contention the line of used moves from core to
	// core on every add while due and start, read after the add, stay put.
	// That holds when the segment starts on a cache line: it is 128 bytes,
	// one of the Go allocator's size classes, whose objects lie at multiples
	// of 128 bytes in page-aligned spans (TestSegmentLayout checks both).
	// Go promises no alignment beyond 8 bytes; were a segment misaligned, a
	// take would cost more, never hand out a wrong ID. The previous layout,
	// a full line of padding on each side of used, needed no alignment and
	// cost 192 bytes per segment, up to two segments per tag
	// (docs/architecture.md, "Memory per tag").
	used atomic.Int64
	_    [cacheLine - 8]byte

	// due is the used count up to which a take needs nothing more: the
	// fast path is n <= due. It is prefetchAfter while no next segment is
	// pending, size once one is (buffer.setPending keeps it so), so that
	// the fast path reads no field of the buffer after its add.
	due atomic.Int64
	// start and max bound the segment: IDs start..max-1; size is
	// max - start, the number of IDs.
	start, max, size int64
	// step is the buffer's step when the segment was loaded (Leaf's
	// Segment.step); it is the base of the 10% prefetch rule.
	step int64
	// prefetchAfter is the used count past which the idle part, max minus
	// the next value, is below 0.9*step (Leaf: getIdle() < 0.9*getStep()).
	prefetchAfter int64
	_             [cacheLine - 6*8]byte
}

// cacheLine is the size of a CPU cache line in bytes: 64 on amd64 and most
// arm64 cores. On a CPU with longer lines used shares its line with the
// read-mostly fields, which costs speed, never correctness.
const cacheLine = 64

func newSegment(start, max, step int64) *segment {
	size := max - start
	s := &segment{
		start:         start,
		max:           max,
		size:          size,
		step:          step,
		prefetchAfter: int64(math.Floor(float64(size) - 0.9*float64(step))),
	}
	s.due.Store(s.prefetchAfter)
	return s
}

// take is the fast path of Get and [Tag.Get]: one atomic add, no lock. n is
// the used count after the add; ID start+n-1 is valid when n <= size. fast
// is true when it is valid and nothing else is due (n <= due): within the
// first 10% of the segment (Leaf: idle >= 0.9*step), or with a next segment
// pending. Otherwise the caller calls prefetch (which does nothing while in
// backoff or with a load pending) before returning the ID, or, past size,
// moves on to the next segment.
func (s *segment) take() (n int64, fast bool) {
	n = s.used.Add(1)
	return n, n <= s.due.Load()
}

// retireAt is the used count retire adds: far above any size (at most
// 2^63-1 IDs), and far below the 2^63 takes that would wrap it.
const retireAt = 1 << 62

// retire makes every later take of s fail, fast path and slow path alike,
// as if s were spent: a segment that leaves cur before it is spent (its tag
// dropped, the generator closed) must not serve from a Tag handle that
// cached it. Takes before retire keep their IDs (they were inside s). The
// caller holds the buffer's lock and has counted s's issued IDs first.
//
// It returns the used count before it: the takes that got an ID are the
// first min(used, size), and no take after retire gets one.
func (s *segment) retire() (used int64) { return s.used.Add(retireAt) - retireAt }

// spent reports whether every ID of the segment was taken.
func (s *segment) spent() bool { return s.used.Load() >= s.size }

// issued is the number of IDs handed out from the segment.
func (s *segment) issued() int64 {
	return min(s.used.Load(), s.size)
}

func (s *segment) stats() SegmentStats {
	return SegmentStats{Value: s.start + s.issued(), Max: s.max, Step: s.step}
}

// loadCall is one allocation in flight. done is closed when it ends; err is
// set before that and read only after.
type loadCall struct {
	done chan struct{}
	err  error
}

// buffer is the per-tag double buffer (Leaf's SegmentBuffer). There is one
// per tag of leaf_alloc, busy or not, so its size is most of the memory a
// tag costs (docs/architecture.md, "Memory per tag"; TestBufferSize): what
// only a failing tag needs lives in fail, allocated at its first failure,
// and the segment switched away from is remembered by its bounds, not kept.
type buffer struct {
	tag string
	// seq orders buffer creation, so that a refresh whose tag list was read
	// before a miss lookup created a buffer does not drop it.
	seq uint64

	// cur is the segment IDs are taken from; nil until the first load.
	cur atomic.Pointer[segment]
	// retryAt is the Clock instant, in Unix nanoseconds, before which no
	// load is started after a failure; 0 when not in backoff.
	retryAt atomic.Int64
	// known is true once the tag is known to have a row: a refresh listed
	// it, a miss lookup found it, or an allocation of it succeeded
	// (LoadEvent.Known).
	known atomic.Bool
	// pending is true while a next segment is ready or a load is in flight,
	// so that the fast path starts at most one prefetch.
	pending atomic.Bool
	// ord is the group commit of an ordered tag (ordered.go), nil for a
	// plain one. An ordered buffer never holds a segment: cur stays nil, so
	// every Get takes the slow path to orderedGet.
	ord atomic.Pointer[orderQueue]

	mu sync.Mutex // guards the fields below and the switch of cur
	// next is the prefetched segment, nil when none is ready (Leaf's
	// nextReady is next != nil).
	next *segment
	// load is the allocation in flight, nil when none.
	load *loadCall
	// fail holds the load failures; nil until the first one, kept after a
	// success for display.
	fail *loadFailures
	// step is the current dynamic step and minStep the DB step read by the
	// last load, in IDs (Leaf's step and minStep).
	step, minStep int64
	// lastLoad and lastLatency describe the last successful load: its Clock
	// time and its real duration.
	lastLoad    time.Time
	lastLatency time.Duration
	// retired counts IDs handed out from segments that are no longer cur.
	retired int64
	// highMax is the tag's high-water mark: the highest max_id accepted
	// for it, by this generator or (through Config.Marks) an earlier one.
	// A segment that starts below it is refused (ErrRewound).
	highMax int64
	// prevMax and prevStep are the max and step of the segment switched
	// away from (spent, so its next value is its max), shown in Stats in
	// the slot of next until a new next arrives (Leaf's /cache shows the
	// same); prevMax is 0 before the first switch.
	prevMax, prevStep int64
	// pos is the index, 0 or 1, of cur in Leaf's two-slot display.
	pos uint8
	// probe marks a buffer created by a miss lookup; it is dropped from the
	// cache when its first load fails.
	probe bool
	// initOK is true once the first segment was loaded (Leaf's initOk).
	initOK bool
	// removed is true once the tag left the cache: Get answers
	// ErrTagNotFound, and a Tag handle holding b looks the tag up again.
	removed bool
	// refusing is true from a refusal (ErrRewound) until the next
	// successful load.
	refusing bool
	// grown is true once a load after the first succeeded. Leaf's
	// updateTimestamp, which drives the dynamic step, is then lastLoad (it
	// is set on every such load, as lastLoad is); before, it is zero.
	grown bool
}

// loadFailures is the failure history of a buffer.
type loadFailures struct {
	// failures counts failed loads since the last success; total counts
	// all of them.
	failures, total int64
	// lastErr is the last load error, kept after a success for display.
	lastErr error
}

// failed returns b.fail, allocating it at the first failure. b.mu must be
// held.
func (b *buffer) failed() *loadFailures {
	if b.fail == nil {
		b.fail = &loadFailures{}
	}
	return b.fail
}

// updated is Leaf's updateTimestamp: zero until the first prefetch (a load
// after the first one) succeeded, then the Clock time of the last one.
// b.mu must be held.
func (b *buffer) updated() time.Time {
	if !b.grown {
		return time.Time{}
	}
	return b.lastLoad
}

// setPending records whether a next segment is pending (a load in flight
// or a next segment ready) and sets the due count of cur to match. b.mu
// must be held.
func (b *buffer) setPending(v bool) {
	b.pending.Store(v)
	if cur := b.cur.Load(); cur != nil {
		if v {
			cur.due.Store(cur.size)
		} else {
			cur.due.Store(cur.prefetchAfter)
		}
	}
}

// remove marks b as dropped from the cache and clears it, so that the fast
// path of a Tag handle still holding b fails without reading removed and the
// slow path answers [ErrTagNotFound]. b.mu must be held.
func (b *buffer) remove() {
	b.removed = true
	b.clear()
}

// clear drops the segments of b, cur and next, after a remove or Close. The
// fast path, which reads cur without the lock and checks no flag, then
// fails, and the slow path answers. cur is also retired (see retire), for a
// Tag handle that still holds it. It returns cur's used count at the retire
// (0 without cur). b.mu must be held.
func (b *buffer) clear() (used int64) {
	if cur := b.cur.Load(); cur != nil {
		used = cur.retire()
		b.retired += min(used, cur.size)
		b.cur.Store(nil)
	}
	b.next = nil
	return used
}

// stats snapshots the buffer for [Generator.Stats].
func (b *buffer) stats() BufferStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := BufferStats{
		BizTag:          b.tag,
		InitOK:          b.initOK,
		NextReady:       b.next != nil,
		Loading:         b.load != nil,
		Pos:             int(b.pos),
		Step:            b.step,
		MinStep:         b.minStep,
		LastLoad:        b.lastLoad,
		LastLoadLatency: b.lastLatency,
		Issued:          b.retired,
		Refusing:        b.refusing,
		HighWater:       b.highMax,
	}
	if f := b.fail; f != nil {
		st.LoadFailures = f.total
		if f.lastErr != nil {
			st.LastError = f.lastErr.Error()
		}
	}
	if ra := b.retryAt.Load(); ra != 0 {
		st.RetryAt = time.Unix(0, ra)
	}
	if q := b.ord.Load(); q != nil {
		q.fill(&st)
		return st
	}
	if cur := b.cur.Load(); cur != nil {
		st.Segments[b.pos] = cur.stats()
		st.Issued += cur.issued()
		st.Remaining = cur.size - cur.issued()
	}
	switch {
	case b.next != nil:
		st.Segments[1-b.pos] = b.next.stats()
		st.Remaining += b.next.size
	case b.prevMax != 0:
		st.Segments[1-b.pos] = SegmentStats{Value: b.prevMax, Max: b.prevMax, Step: b.prevStep}
	}
	return st
}
