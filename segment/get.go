package segment

import (
	"context"
	"fmt"
	"time"
)

// Get returns the next ID of tag, always > 0 and never handed out before by
// any generator sharing the database. tag is an opaque string: validating it
// is the caller's job. The fast path is one atomic add with no lock and
// ignores ctx. When the current segment is spent Get switches to the
// prefetched next one, or waits for the load in flight up to
// [Config.WaitTimeout] (for the first segment of a tag too) and until ctx
// is done.
//
// Errors (see Code): [ErrTagNotFound] for a tag without a row (remembered for
// one second after a lookup found none); [ErrNoSegment] when no segment is ready in
// time, the load failed, the tag is in backoff after a failure (wrapping
// the store error, or ctx's cause when ctx ended the wait), or the lookup of
// a tag not in the cache failed or took longer than [Config.WaitTimeout];
// [ErrMissLimited] when the tag is not in the cache and too many unknown
// names wait for a lookup already (retry later; see miss.go);
// [ErrNotInitialized] when the tag is unknown, the tag list was never read and
// the database does not answer; [ErrClosed] after Close.
//
// A caller that asks for the same tag over and over saves the lookup of the
// tag (most of Get's time) with a handle from [Generator.Tag].
func (g *Generator) Get(ctx context.Context, tag string) (int64, error) {
	// A cached tag skips lookup's call and closed check: after Close its
	// buffer holds no segment, so next ends in await's check.
	b := (*g.cache.Load())[tag]
	if b == nil {
		var err error
		if b, err = g.lookup(ctx, tag); err != nil {
			return 0, err
		}
	}
	return g.next(ctx, b, nil)
}

// lookup returns the buffer of tag: the cached one, or for a tag not in the
// cache a probe buffer, not yet loaded (see probe); [ErrClosed] after Close.
// It is Get's first half; Tag and a Tag whose buffer was dropped use it too.
func (g *Generator) lookup(ctx context.Context, tag string) (*buffer, error) {
	if g.closed.Load() {
		return nil, ErrClosed
	}
	if b := (*g.cache.Load())[tag]; b != nil {
		return b, nil
	}
	return g.probe(ctx, tag)
}

// next is Get's second half, shared with [Tag.Get] (t, nil for Get): the fast
// path, segment.take on the current segment, and slow for everything else.
// It is not inlined (too large); [Tag.Get] is, so a handle's Get costs one
// call.
func (g *Generator) next(ctx context.Context, b *buffer, t *Tag) (int64, error) {
	var n int64
	s := b.cur.Load()
	if s != nil {
		var fast bool
		if n, fast = s.take(); fast {
			return s.start + n - 1, nil
		}
	}
	return g.slow(ctx, b, t, s, n)
}

// slow is next past its fast path: s is the current segment next read from
// b (nil if none) and n its used count after its take (0 if s is nil). An ID
// still inside s is handed out after starting the prefetch; otherwise await
// switches segments or waits for a load. For a Tag handle t whose buffer
// was dropped from the cache (a refresh no longer listed the tag, or a load
// found the row gone), slow looks the tag up again as Get does and moves the
// handle to the buffer found.
func (g *Generator) slow(ctx context.Context, b *buffer, t *Tag, s *segment, n int64) (int64, error) {
	if s != nil && n <= s.size {
		g.prefetch(b)
		return s.start + n - 1, nil
	}
	id, err := g.await(ctx, b, false)
	if err == nil || t == nil {
		return id, err
	}
	b.mu.Lock()
	removed := b.removed
	b.mu.Unlock()
	if !removed {
		return 0, err
	}
	nb, err := g.lookup(ctx, t.tag)
	if err != nil {
		return 0, err
	}
	t.b.CompareAndSwap(b, nb)
	return g.next(ctx, nb, nil)
}

// await takes an ID from b when the current segment is missing or spent:
// switch to next, or wait for a load, and retry. It never spins: each round
// either switches (which only happens once per segment), waits on a load, or
// returns. With peek it takes no ID: it returns 0, nil as soon as b has a
// current segment with IDs left ([Generator.Tag] waiting for a miss lookup's
// first load).
func (g *Generator) await(ctx context.Context, b *buffer, peek bool) (int64, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if g.closed.Load() {
			return 0, ErrClosed
		}
		if q := b.ord.Load(); q != nil {
			// An ordered tag (ordered.go): nothing to load or peek at.
			if peek {
				return 0, nil
			}
			return g.orderedGet(ctx, b, q, 1)
		}
		s := b.cur.Load()
		if s != nil {
			if peek {
				if !s.spent() {
					return 0, nil
				}
			} else if n, fast := s.take(); n <= s.size {
				if !fast {
					g.prefetch(b)
				}
				return s.start + n - 1, nil
			}
		}
		call, err := g.advance(b, s)
		if err != nil {
			return 0, err
		}
		if call == nil {
			continue // cur moved on; take again
		}
		if timer == nil {
			// The first segment of a tag (a miss lookup) too: no answer
			// waits past WaitTimeout (issue 16 item 7); the load goes on.
			timer = time.NewTimer(g.cfg.WaitTimeout)
		}
		select {
		case <-call.done:
			if call.err != nil {
				return 0, call.err
			}
		case <-timer.C:
			return 0, fmt.Errorf("%w: %q: no segment within the wait timeout", ErrNoSegment, b.tag)
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %q: %w", ErrNoSegment, b.tag, context.Cause(ctx))
		case <-g.root.Done():
			return 0, ErrClosed
		}
	}
}

// advance is called when seen, the segment the caller last read from cur,
// is spent or nil. Under the buffer lock it switches to next if ready
// (returns nil, nil: take again), or returns the load to wait for, starting
// one unless the tag is in backoff.
func (g *Generator) advance(b *buffer, seen *segment) (*loadCall, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.removed:
		return nil, fmt.Errorf("%w: %q", ErrTagNotFound, b.tag)
	case b.cur.Load() != seen:
		return nil, nil
	case b.next != nil:
		if seen != nil {
			b.retired += seen.size
			b.prevMax, b.prevStep = seen.max, seen.step
		}
		b.cur.Store(b.next)
		b.next = nil
		b.pos ^= 1
		b.setPending(false)
		return nil, nil
	case b.load != nil:
		return b.load, nil
	}
	if ra := b.retryAt.Load(); ra != 0 {
		if wait := time.Duration(ra - g.clock.Now().UnixNano()); wait > 0 {
			return nil, fmt.Errorf("%w: %q: loads failing, next try in %v: %w", ErrNoSegment, b.tag, wait, b.failed().lastErr)
		}
	}
	call := g.startLoad(b)
	if call == nil {
		return nil, ErrClosed
	}
	return call, nil
}

// prefetch starts one background load of the next segment unless one is
// pending or the tag is in backoff. Called from the fast path once the idle
// part of cur is below 90% of its step.
func (g *Generator) prefetch(b *buffer) {
	if ra := b.retryAt.Load(); ra != 0 && g.clock.Now().UnixNano() < ra {
		return
	}
	if !b.pending.CompareAndSwap(false, true) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next != nil || b.load != nil {
		return // a load raced us; pending is rightly true
	}
	if b.removed || !b.initOK || g.startLoad(b) == nil {
		b.setPending(false)
	}
}
