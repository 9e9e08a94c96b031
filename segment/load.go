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

// LoadEvent describes one segment load for [Config.OnLoad]: the allocation,
// guarded by the tag's high-water mark (with its retry at the row's own step
// after [store.ErrOverflow], and after a refusal below the mark the check
// of another server's tail return and one more allocation), the checks of
// the segment and the store of its mark.
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
	// last tag list read, a miss lookup found its row, or an allocation of
	// it succeeded (this one or an earlier one of the same cached tag).
	// A name the store has no row for never gets a load, so that a
	// metrics consumer labelling only Known loads keeps probes of random
	// tags from creating series. Known is always true when Err is nil.
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
// The allocation carries the mark: the store refuses it, leaving the row
// unchanged, when max_id is below ([store.ErrBelowMark], [ErrRewound]
// here). [Config.OnLoad] hears of the load before its waiters are
// woken. On failure load sets the backoff, or removes the tag when the store
// no longer has it. The steps: fetch (the database and the mark, no lock),
// then under b.mu one of install, forget, refuse or fail; their log lines
// are written after the lock is released.
func (g *Generator) load(b *buffer, call *loadCall, first bool, step int64) {
	// Only this load changes highMax and refusing (one load per buffer).
	b.mu.Lock()
	high := b.highMax
	b.mu.Unlock()

	r := g.fetch(b, step, high)
	now := g.clock.Now()
	if g.cfg.OnLoad != nil && !errors.Is(r.err, store.ErrTagNotFound) {
		// Outside the buffer lock, before the waiters wake: a caller that
		// saw the load fail finds it counted.
		g.cfg.OnLoad(LoadEvent{BizTag: b.tag, Latency: r.latency, Err: r.err, Known: r.allocated || b.known.Load()})
	}

	b.mu.Lock()
	var (
		drop, missing bool
		logAfter      func() // a log line written once b.mu is released
	)
	switch {
	case r.err == nil:
		call.err = g.install(b, r, first, now)
	case errors.Is(r.err, store.ErrTagNotFound):
		drop, missing = true, true
		call.err = forget(b, r.err)
	case errors.Is(r.err, ErrRewound):
		logAfter, call.err = g.refuse(b, r, now)
	default:
		drop, logAfter, call.err = g.fail(b, r.err, first, now)
	}
	if drop {
		// Before waking the waiters, so that none of them can still
		// find the tag cached after its error.
		g.drop(b, missing)
	}
	b.load = nil
	close(call.done)
	b.mu.Unlock()
	if logAfter != nil {
		logAfter()
	}
}

// loadResult is what the database work of one load (fetch) produced.
type loadResult struct {
	alloc store.Allocation
	seg   *segment // nil unless err is nil
	// high is the high-water mark the load checked against: the buffer's,
	// or the one a tail return of another server lowered it to.
	high      int64
	allocated bool // an Allocate succeeded: the row exists
	latency   time.Duration
	err       error
}

// fetch does the database work of a load of b's tag within
// [Config.LoadTimeout]: the allocation at step against the mark high
// (allocate), the checks of the segment (checkAlloc) and the durable store
// of its mark. An allocation refused below the mark may be explained by
// another server's tail return (checkReturned): then it is tried once more
// against the lowered mark. It takes no lock.
func (g *Generator) fetch(b *buffer, step, high int64) loadResult {
	tag := b.tag
	ctx, cancel := context.WithTimeout(g.root, g.cfg.LoadTimeout)
	defer cancel()
	t0 := time.Now()
	r := loadResult{high: high}
	r.alloc, step, r.err = g.allocate(ctx, tag, step, high)
	if errors.Is(r.err, ErrRewound) {
		if h, ok := g.checkReturned(ctx, b); ok {
			r.high = h
			r.alloc, step, r.err = g.allocate(ctx, tag, step, h)
		}
	}
	r.allocated = r.err == nil
	if r.err == nil {
		r.seg, r.err = checkAlloc(tag, r.alloc, step, r.high)
	}
	if r.err == nil {
		r.err = g.storeMark(ctx, tag, r.seg.max)
	}
	r.latency = time.Since(t0)
	return r
}

// allocate reserves a segment of tag at step (0: the row's own step),
// guarded by the high-water mark (<= 1: none). The guard is the store's
// UPDATE itself, not a read before it: a table rewound below the mark
// ([ErrRewound], wrapping [store.ErrBelowMark]) is noticed without burning
// a segment, whose size (the grown dynamic step) could carry max_id past
// another server's lower mark and let that server repeat this one's IDs,
// and no rewind between a check and the write can slip one through. When
// the grown dynamic step no longer fits below int64's end
// ([store.ErrOverflow], the store refused without a change), the row's own
// step may: it is asked for once. It returns the step the allocation used.
func (g *Generator) allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, int64, error) {
	alloc, err := g.st.Allocate(ctx, tag, step, mark)
	if errors.Is(err, store.ErrOverflow) && step > 0 {
		step = 0
		alloc, err = g.st.Allocate(ctx, tag, step, mark)
	}
	return alloc, step, rewound(err)
}

// rewound wraps the store's refusal of an allocation below the high-water
// mark ([store.ErrBelowMark]) in [ErrRewound]; other errors pass as they
// are.
func rewound(err error) error {
	if errors.Is(err, store.ErrBelowMark) {
		return fmt.Errorf("%w: %w", ErrRewound, err)
	}
	return err
}

// install takes in the accepted segment of r: as cur for the first load,
// as next otherwise, unless a refresh dropped the tag meanwhile (the error
// for the waiters) or it turned ordered. b.mu must be held.
func (g *Generator) install(b *buffer, r loadResult, first bool, now time.Time) error {
	switch {
	case b.removed:
		// A refresh dropped the tag during the load: install nothing, so
		// that a Tag handle still holding b hands out no ID of a dropped
		// tag. The segment's IDs are skipped; its mark was stored.
		b.setPending(false)
		return fmt.Errorf("%w: %q", ErrTagNotFound, b.tag)
	case b.ord.Load() != nil:
		// The tag turned ordered during the load (ordered.go): an ordered
		// buffer holds no segment. The waiters retry, and are served by
		// the ordered path; the segment's IDs are skipped.
		b.known.Store(true)
		b.highMax = max(b.highMax, r.seg.max)
		b.setPending(false)
		return nil
	}
	b.known.Store(true)
	b.highMax = max(b.highMax, r.seg.max) // a refresh may have raised it meanwhile
	if b.refusing {
		b.refusing = false
		g.log.Warn("segment: tag serves again: max_id is at or above the high-water mark",
			"biz_tag", b.tag, "segment", fmt.Sprintf("[%d, %d)", r.seg.start, r.seg.max), "high_water", r.high)
	}
	if b.fail != nil {
		b.fail.failures = 0
	}
	b.retryAt.Store(0)
	b.lastLoad, b.lastLatency = now, r.latency
	b.step, b.minStep = r.alloc.Step, r.alloc.DBStep
	if first {
		// Leaf: step = minStep = DB step; updateTimestamp untouched.
		b.cur.Store(r.seg)
		b.initOK = true
		b.setPending(false)
		return nil
	}
	// pending stays true: a next segment is ready.
	b.grown = true // updated() is now lastLoad
	b.next = r.seg
	return nil
}

// forget removes a tag whose row the store no longer has (err); the caller
// drops it from the cache. It returns the waiters' error. b.mu must be held.
func forget(b *buffer, err error) error {
	f := b.failed()
	f.total++
	f.lastErr = err
	b.remove()
	b.setPending(false)
	return fmt.Errorf("%w: %q", ErrTagNotFound, b.tag)
}

// refuse marks the tag refusing after r found the database behind the
// high-water mark ([ErrRewound]), with the backoff of
// [Config.RefuseRetryMax]. The row exists (it allocated) and the tag must
// stay visible as refusing, so even a miss-lookup buffer is kept. It
// returns the error log line (nil after Close) and the waiters' error.
// b.mu must be held.
func (g *Generator) refuse(b *buffer, r loadResult, now time.Time) (logAfter func(), callErr error) {
	b.refusing = true
	f := b.failed()
	f.failures++
	f.total++
	f.lastErr = r.err
	backoff := g.backoff(f.failures, g.cfg.RefuseRetryMax)
	b.retryAt.Store(now.Add(backoff).UnixNano())
	b.setPending(false)
	callErr = fmt.Errorf("%w: %w", ErrNoSegment, r.err)
	if g.root.Err() != nil {
		return nil, callErr
	}
	attrs := []any{"biz_tag", b.tag, "high_water", r.high}
	if r.alloc.MaxID != 0 {
		attrs = append(attrs, "segment", fmt.Sprintf("[%d, %d)", r.alloc.Start(), r.alloc.MaxID))
	}
	attrs = append(attrs, "retry_in", backoff,
		"fix", fmt.Sprintf("leafctl tag fence %s --min <highest high_water of all servers>", b.tag),
		"err", r.err)
	return func() {
		g.log.Error("segment: refusing tag: the database went back in time (restored backup or lagging replica); "+
			"no new segment for it until max_id is fenced forward to the high-water mark", attrs...)
	}, callErr
}

// fail records a failed load (err) and its backoff: up to
// [Config.RetryMax], or [Config.RefuseRetryMax] for a refusing tag. A
// first load of a tag that only a miss lookup asked for is dropped (drop
// true): an unconfirmed tag is not kept. It returns the log line (nil
// after Close) and the waiters' error. b.mu must be held.
func (g *Generator) fail(b *buffer, err error, first bool, now time.Time) (drop bool, logAfter func(), callErr error) {
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
	callErr = fmt.Errorf("%w: load %q: %w", ErrNoSegment, b.tag, err)
	if first && b.probe && !b.refusing {
		// A miss lookup that failed: do not keep an unconfirmed tag.
		b.remove()
		drop = true
		if !g.ready.Load() {
			callErr = fmt.Errorf("%w: load %q: %w", ErrNotInitialized, b.tag, err)
		}
	}
	if g.root.Err() != nil { // cancelled by Close
		return drop, nil, callErr
	}
	level := slog.LevelWarn
	if b.refusing || errors.Is(err, store.ErrOverflow) || errors.Is(err, errMarkNotStored) {
		level = slog.LevelError // no ID for this tag until an operator acts
	}
	args := []any{"biz_tag", b.tag, "first", first, "failures", f.failures, "retry_in", backoff, "refusing", b.refusing, "err", err}
	return drop, func() { g.log.Log(context.Background(), level, "segment: load failed", args...) }, callErr
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
