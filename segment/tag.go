package segment

import (
	"context"
	"sync/atomic"
)

// Tag is a handle on one biz_tag of a Generator, for callers that ask for IDs
// of a fixed tag over and over: [Tag.Get] answers what [Generator.Get]
// answers for the tag, without looking the tag up in the generator's cache on
// every call (the string hash and map probe are most of [Generator.Get]'s
// time). All methods are safe for concurrent use; one Tag may be shared by
// any number of goroutines, and [Tag.Get] and [Generator.Get] of the same tag
// may be mixed: both take from the same buffer, so no ID is handed out twice.
//
// A Tag follows its biz_tag, not one buffer: when a refresh (or a load that
// finds the row gone) drops the tag, the handle's next Get looks the tag up
// again exactly as [Generator.Get] would, so it answers [ErrTagNotFound] while
// the row is missing and serves again once the row is back (a tag not in
// the cache is a miss lookup, as for Get). A tag deleted
// and re-created with a lower max_id is refused like any rewound table
// ([ErrNoSegment] wrapping [ErrRewound]), because the high-water mark outlives
// the buffer. After Close, Get answers [ErrClosed].
type Tag struct {
	// seg is the segment the handle takes from: the buffer's cur as the
	// handle last saw it, so that the fast path is one load, one atomic
	// add and one compare, inlined into the caller. A segment that is no
	// longer cur is spent or retired (buffer.clear), so a take from it
	// fails and Get goes to slow, which reads cur again. Never nil: a
	// handle starts on spentSegment.
	seg atomic.Pointer[segment]
	// b is the tag's buffer; replaced when the buffer was dropped and the
	// tag is looked up again.
	b   atomic.Pointer[buffer]
	g   *Generator
	tag string
	// pad fills the handle to 64 bytes, one cache line: it is read on
	// every Get, and a neighbour on its line written often would make every
	// core that reads it miss. Heap objects of this size start on a line
	// in practice, though Go does not promise it. (A precaution:
	// BenchmarkTagGet has no such neighbour.)
	_ [24]byte
}

// spentSegment is where a Tag starts: every take from it fails (its used
// count starts at retireAt, its size is 0), so the first Get goes to slow.
var spentSegment = func() *segment {
	s := &segment{}
	s.used.Store(retireAt)
	s.due.Store(-retireAt)
	return s
}()

// Tag returns a handle on tag. It resolves tag as [Generator.Get] does: a
// cached tag returns at once (its first segment, if not loaded yet, is
// loaded by the first Get); a tag not in the cache is looked up in the
// database (the miss lookup, see miss.go) for up to [Config.WaitTimeout], and a tag found has its first segment
// loaded, waiting for it as a first Get does and until ctx is done. It takes
// no ID.
//
// Errors are [Generator.Get]'s for the same tag: [ErrTagNotFound] for a tag
// without a row, [ErrMissLimited] when too many unknown names wait
// for a lookup (retry later), [ErrNoSegment] when the lookup or the first load
// failed or timed out,
// [ErrNotInitialized] when the tag list was never read and the database does
// not answer, [ErrClosed] after Close.
func (g *Generator) Tag(ctx context.Context, tag string) (*Tag, error) {
	b, err := g.lookup(ctx, tag)
	if err != nil {
		return nil, err
	}
	if b.probe && b.cur.Load() == nil {
		if _, err := g.await(ctx, b, true); err != nil {
			return nil, err
		}
	}
	t := &Tag{g: g, tag: tag}
	t.b.Store(b)
	t.seg.Store(spentSegment)
	return t, nil
}

// Get returns the next ID of the tag, with [Generator.Get]'s guarantees (> 0,
// never handed out before by any generator sharing the database), timeouts
// and errors. The fast path is one atomic add with no lock and no map
// lookup, inlined into the caller, and ignores ctx.
func (t *Tag) Get(ctx context.Context) (int64, error) {
	s := t.seg.Load()
	if n := s.used.Add(1); n <= s.due.Load() {
		return s.start + n - 1, nil
	} else {
		return t.slow(ctx, s, n)
	}
}

// slow is [Tag.Get] past its fast path: n is the used count of s, the
// handle's segment, after Get's take. An n within s's size is an ID taken
// while s was cur (a spent or retired segment fails every take), handed out
// by Generator.slow with the prefetch it is due; otherwise the buffer's
// current segment is taken from as [Generator.Get] would. Either way the
// handle then caches the buffer's cur for the next Get.
func (t *Tag) slow(ctx context.Context, s *segment, n int64) (int64, error) {
	var (
		id  int64
		err error
	)
	if n <= s.size {
		id, err = t.g.slow(ctx, t.b.Load(), t, s, n)
	} else {
		id, err = t.g.next(ctx, t.b.Load(), t)
	}
	if cur := t.b.Load().cur.Load(); cur != nil {
		t.seg.Store(cur)
	}
	return id, err
}
