package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/leaf-go/leaf/store"
)

// LoadEvent describes one segment load for [Config.OnLoad]: the max_id check
// of a tag with a high-water mark, the allocation (with its retry at the
// row's own step after [store.ErrOverflow]), the checks of the segment and the
// store of its mark.
type LoadEvent struct {
	// BizTag is the tag whose segment was loaded.
	BizTag string
	// Latency is the load's duration on the real clock, the same value
	// [BufferStats.LastLoadLatency] shows after a successful load.
	Latency time.Duration
	// Err is nil when the segment was accepted, otherwise the load's error
	// (a store or context error, or one wrapping [ErrRewound]).
	Err error
	// Known reports whether the tag is known to have a row: it was in the
	// last tag list read, or an allocation of it succeeded (this one or an
	// earlier one of the same cached tag). A failure of a tag that only a
	// miss lookup asked for is not Known, so that a metrics consumer can
	// keep probes of random tags from creating series. Known is always
	// true when Err is nil.
	Known bool
}

// startLoad starts a load of the next (or, before initOK, the first)
// segment, with the step nextStep gives. It returns nil when the generator
// is closed. b.mu must be held.
func (g *Generator) startLoad(b *buffer) *loadCall {
	call := &loadCall{done: make(chan struct{})}
	first := !b.initOK
	var sinceLast time.Duration
	updated := b.updated()
	if !updated.IsZero() {
		sinceLast = g.clock.Now().Sub(updated)
	}
	step := nextStep(first || updated.IsZero(), b.step, b.minStep, sinceLast, g.cfg) // 0: the row's own step
	if !g.spawn(func() { g.load(b, call, first, step) }) {
		return nil
	}
	b.load = call
	b.setPending(true)
	return call
}

// load runs one allocation and installs the segment: as cur for the first
// load, as next otherwise. An accepted segment's max_id becomes the tag's
// high-water mark, stored through [Config.Marks] before the segment is
// installed, so that no ID of it is handed out before the mark is durable.
// A tag with a mark first has its max_id checked against the mark
// ([Store.MaxID]). [Config.OnLoad] hears of the load before its waiters are
// woken. On failure load sets the backoff, or removes the tag when the store
// no longer has it.
func (g *Generator) load(b *buffer, call *loadCall, first bool, step int64) {
	// Only this load changes highMax and refusing (one load per buffer).
	b.mu.Lock()
	high := b.highMax
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(g.root, g.cfg.LoadTimeout)
	t0 := time.Now()
	var (
		alloc     store.Allocation
		seg       *segment
		err       error
		allocated bool // an Allocate succeeded: the row exists
	)
	if high > 1 {
		// Read before allocating: a rewound table is noticed without
		// burning a segment, whose size (the grown dynamic step) could carry
		// max_id past another server's lower mark and let that server repeat
		// this one's IDs. A fresh mark (high <= 1) has nothing to check; a
		// refusing tag always has a mark above 1.
		err = checkMaxID(ctx, g.st, b.tag, high)
		if errors.Is(err, ErrRewound) {
			// Maybe not a rewind: another server gave its tail back.
			if h, ok := g.checkReturned(ctx, b); ok {
				high = h
				err = checkMaxID(ctx, g.st, b.tag, high)
			}
		}
	}
	if err == nil {
		alloc, err = g.st.Allocate(ctx, b.tag, step)
		if errors.Is(err, store.ErrOverflow) && step > 0 {
			// The grown dynamic step no longer fits below int64's end;
			// the row's own step may (the store refused without a change).
			step = 0
			alloc, err = g.st.Allocate(ctx, b.tag, step)
		}
		allocated = err == nil
	}
	if err == nil {
		seg, err = checkAlloc(b.tag, alloc, step, high)
	}
	if err == nil {
		err = g.storeMark(ctx, b.tag, seg.max)
	}
	latency := time.Since(t0)
	cancel()
	now := g.clock.Now()
	if g.cfg.OnLoad != nil && !errors.Is(err, store.ErrTagNotFound) {
		// Outside the buffer lock, before the waiters wake: a caller that
		// saw the load fail finds it counted.
		g.cfg.OnLoad(LoadEvent{BizTag: b.tag, Latency: latency, Err: err, Known: allocated || b.known.Load()})
	}

	b.mu.Lock()
	drop, missing := false, false
	switch {
	case err == nil && b.removed:
		// A refresh dropped the tag during the load: install nothing, so
		// that a Tag handle still holding b hands out no ID of a dropped
		// tag. The segment's IDs are skipped; its mark was stored.
		b.setPending(false)
		call.err = fmt.Errorf("%w: %q", ErrTagNotFound, b.tag)
	case err == nil && b.ord.Load() != nil:
		// The tag turned ordered during the load (ordered.go): an ordered
		// buffer holds no segment. The waiters retry, and are served by
		// the ordered path; the segment's IDs are skipped.
		b.known.Store(true)
		b.highMax = max(b.highMax, seg.max)
		b.setPending(false)
	case err == nil:
		b.known.Store(true)
		b.highMax = max(b.highMax, seg.max) // a refresh may have raised it meanwhile
		if b.refusing {
			b.refusing = false
			g.log.Warn("segment: tag serves again: max_id is at or above the high-water mark",
				"biz_tag", b.tag, "segment", fmt.Sprintf("[%d, %d)", seg.start, seg.max), "high_water", high)
		}
		if b.fail != nil {
			b.fail.failures = 0
		}
		b.retryAt.Store(0)
		b.lastLoad, b.lastLatency = now, latency
		switch {
		case first:
			// Leaf: step = minStep = DB step; updateTimestamp untouched.
			b.step, b.minStep = alloc.Step, alloc.DBStep
			b.cur.Store(seg)
			b.initOK = true
			b.setPending(false)
		default:
			// pending stays true: a next segment is ready.
			b.step, b.minStep = alloc.Step, alloc.DBStep
			b.grown = true // updated() is now lastLoad
			b.next = seg
		}
	case errors.Is(err, store.ErrTagNotFound):
		f := b.failed()
		f.total++
		f.lastErr = err
		b.remove()
		drop, missing = true, true
		b.setPending(false)
		call.err = fmt.Errorf("%w: %q", ErrTagNotFound, b.tag)
	case errors.Is(err, ErrRewound):
		// The row exists (it allocated) and the tag must stay visible as
		// refusing, so even a miss-lookup buffer is kept.
		b.refusing = true
		f := b.failed()
		f.failures++
		f.total++
		f.lastErr = err
		backoff := g.backoff(f.failures, g.cfg.RefuseRetryMax)
		b.retryAt.Store(now.Add(backoff).UnixNano())
		b.setPending(false)
		call.err = fmt.Errorf("%w: %w", ErrNoSegment, err)
		if g.root.Err() == nil {
			attrs := []any{"biz_tag", b.tag, "high_water", high}
			if alloc.MaxID != 0 {
				attrs = append(attrs, "segment", fmt.Sprintf("[%d, %d)", alloc.Start(), alloc.MaxID))
			}
			attrs = append(attrs, "retry_in", backoff,
				"fix", fmt.Sprintf("leafctl tag fence %s --min <highest high_water of all servers>", b.tag),
				"err", err)
			defer g.log.Error("segment: refusing tag: the database went back in time (restored backup or lagging replica); "+
				"no new segment for it until max_id is fenced forward to the high-water mark", attrs...)
		}
	default:
		f := b.failed()
		f.failures++
		f.total++
		f.lastErr = err
		ceiling := g.cfg.RetryMax
		if b.refusing {
			ceiling = g.cfg.RefuseRetryMax
		}
		backoff := g.backoff(f.failures, ceiling)
		b.retryAt.Store(now.Add(backoff).UnixNano())
		b.setPending(false)
		switch {
		case first && b.probe && !b.refusing:
			// A miss lookup that failed: do not keep an unconfirmed tag.
			b.remove()
			drop = true
			if !g.ready.Load() {
				call.err = fmt.Errorf("%w: load %q: %w", ErrNotInitialized, b.tag, err)
			} else {
				call.err = fmt.Errorf("%w: load %q: %w", ErrNoSegment, b.tag, err)
			}
		default:
			call.err = fmt.Errorf("%w: load %q: %w", ErrNoSegment, b.tag, err)
		}
		if g.root.Err() == nil { // not cancelled by Close
			level := slog.LevelWarn
			if b.refusing || errors.Is(err, store.ErrOverflow) || errors.Is(err, errMarkNotStored) {
				level = slog.LevelError // no ID for this tag until an operator acts
			}
			defer g.log.Log(context.Background(), level, "segment: load failed", "biz_tag", b.tag,
				"first", first, "failures", f.failures, "retry_in", backoff, "refusing", b.refusing, "err", err)
		}
	}
	if drop {
		// Before waking the waiters, so that none of them can still
		// find the tag cached after its error.
		g.drop(b, missing)
	}
	b.load = nil
	close(call.done)
	b.mu.Unlock()
}

// checkMaxID returns [ErrRewound] when the max_id of tag is below high. A
// missing row is left to Allocate to report.
func checkMaxID(ctx context.Context, st Store, tag string, high int64) error {
	cur, err := st.MaxID(ctx, tag)
	switch {
	case errors.Is(err, store.ErrTagNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("read max_id of %q: %w", tag, err)
	case cur < high:
		return fmt.Errorf("%w: max_id of %q is %d, below the high-water mark %d", ErrRewound, tag, cur, high)
	}
	return nil
}

// checkAlloc turns an allocation into a segment, refusing what could hand
// out an invalid or duplicate ID. IDs below 1 are cut off (a row whose
// max_id - step < 1); a segment left empty is an error.
func checkAlloc(tag string, a store.Allocation, step, highMax int64) (*segment, error) {
	if a.Step <= 0 || (step > 0 && a.Step != step) {
		return nil, fmt.Errorf("store returned step %d for %q, asked %d", a.Step, tag, step)
	}
	start := max(a.MaxID-a.Step, 1)
	if a.MaxID-a.Step > a.MaxID || start >= a.MaxID {
		return nil, fmt.Errorf("segment [%d, %d) of %q holds no positive ID", a.MaxID-a.Step, a.MaxID, tag)
	}
	if start < highMax {
		return nil, fmt.Errorf("%w: segment [%d, %d) of %q starts below the high-water mark %d",
			ErrRewound, start, a.MaxID, tag, highMax)
	}
	return newSegment(start, a.MaxID, a.Step), nil
}

// backoff returns the wait after the n-th consecutive failure: RetryMin
// doubled n-1 times, capped at ceiling (RetryMax, or RefuseRetryMax for a
// refusing tag), then jittered down by up to half.
func (g *Generator) backoff(n int64, ceiling time.Duration) time.Duration {
	d := g.cfg.RetryMin
	for i := int64(1); i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	if half := int64(d / 2); half > 0 {
		d -= time.Duration(rand.Int64N(half + 1))
	}
	return d
}
