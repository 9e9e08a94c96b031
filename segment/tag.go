package segment

import (
	"context"
	"sync/atomic"
)

// Tag is a handle on one biz_tag of a Generator, for callers that ask for IDs
// of a fixed tag over and over: Tag.Get answers what Generator.Get answers
// for the tag, without looking the tag up in the generator's cache on every
// call (the string hash and map probe are most of Generator.Get's time). All
// methods are safe for concurrent use; one Tag may be shared by any number
// of goroutines, and Tag.Get and Generator.Get of the same tag may be mixed:
// both take from the same buffer, so no ID is handed out twice.
//
// A Tag follows its biz_tag, not one buffer: when a refresh (or a load that
// finds the row gone) drops the tag, the handle's next Get looks the tag up
// again exactly as Generator.Get would, so it answers ErrTagNotFound while
// the row is missing and serves again once the row is back (a tag not in
// the cache is a miss lookup, rate-limited as for Get). A tag deleted
// and re-created with a lower max_id is refused like any rewound table
// (ErrNoSegment wrapping ErrRewound), because the high-water mark outlives
// the buffer. After Close, Get answers ErrClosed.
type Tag struct {
	// b is the tag's buffer; replaced when the buffer was dropped and the
	// tag is looked up again. First, so that the fast path's first load
	// is at offset 0.
	b   atomic.Pointer[buffer]
	g   *Generator
	tag string
	// pad fills the handle to a 64-byte cache line of its own: it is read
	// on every Get, and a neighbour written often would make every core
	// that reads it miss. (A precaution: BenchmarkTagGet has no such
	// neighbour and shows no difference.)
	_ [32]byte
}

// Tag returns a handle on tag. It resolves tag as Generator.Get does: a
// cached tag returns at once (its first segment, if not loaded yet, is
// loaded by the first Get); a tag not in the cache is looked up in the
// database (the rate-limited miss lookup) by loading its first segment,
// waiting for it up to Config.LoadTimeout and until ctx is done. It takes no
// ID.
//
// Errors are Generator.Get's for the same tag: ErrTagNotFound for a tag
// without a row (also when the miss-lookup limit is exhausted),
// ErrNoSegment when the miss lookup's load failed or timed out,
// ErrNotInitialized when the tag list was never read and the database does
// not answer, ErrClosed after Close.
func (g *Generator) Tag(ctx context.Context, tag string) (*Tag, error) {
	b, err := g.lookup(tag)
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
	return t, nil
}

// Get returns the next ID of the tag, with Generator.Get's guarantees (> 0,
// never handed out before by any generator sharing the database), timeouts
// and errors. The fast path is one atomic add with no lock and no map
// lookup, and ignores ctx.
func (t *Tag) Get(ctx context.Context) (int64, error) {
	return t.g.next(ctx, t.b.Load(), t)
}
