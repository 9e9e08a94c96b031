package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/leaf-go/leaf/store"
)

// A tag that a load found without a row answers ErrTagNotFound from memory
// for missTTL, so that a client looping on a misspelt tag costs one lookup
// per missTTL instead of spending the miss-lookup limit that new tags need.
// A row inserted meanwhile is found after missTTL, or at the next refresh
// if sooner. maxMisses bounds the memory: the limiter lets through at most
// MissLookupBurst + MissLookupRate*missTTL lookups per missTTL (40 with the
// defaults), so it is reached only with a much higher rate, and then the
// tags past it are simply not remembered.
const (
	missTTL   = 2 * time.Second
	maxMisses = 1024
)

// Generator hands out segment-mode IDs for every tag of a leaf_alloc table,
// as Leaf's SegmentIDGenImpl. All methods are safe for concurrent use. It owns
// a tag-refresh goroutine and the background loads; Close stops them.
type Generator struct {
	st      Store
	cfg     Config
	clock   Clock
	log     *slog.Logger
	limiter *rate.Limiter // nil when miss lookups are disabled
	marks   Marks         // nil: marks are not persisted

	marksMu sync.Mutex // guards highs
	// highs is the high-water mark of every tag ever loaded or read from
	// Marks; it seeds new buffers, so that a tag dropped and re-created
	// lower is refused too.
	highs map[string]int64

	// cache maps tag to buffer. It is copy-on-write: readers load the
	// pointer without a lock; writers hold cacheMu and store a new map.
	// Lock order: a buffer's mu before cacheMu; nothing takes a buffer's
	// mu while holding cacheMu.
	cache   atomic.Pointer[map[string]*buffer]
	cacheMu sync.Mutex // guards writes of cache, and misses
	// misses holds the tags a load found without a row, with the time of
	// the load: for missTTL probe answers ErrTagNotFound for them without
	// another lookup. At most maxMisses entries.
	misses map[string]time.Time
	// refreshMu serialises Refresh calls so an older tag list never
	// overwrites a newer one.
	refreshMu sync.Mutex
	bufSeq    atomic.Uint64
	ready     atomic.Bool
	closed    atomic.Bool

	// root is cancelled by Close; every load and the refresh loop run under it.
	root   context.Context
	cancel context.CancelFunc

	goMu    sync.Mutex // guards stopped and wg.Add against Close
	stopped bool
	wg      sync.WaitGroup
}

// New returns a Generator reading segments from st. It reads the tag list
// once, synchronously (Leaf's init); if that fails it logs the error and
// still returns the generator with Ready() false: tags then become known by
// miss lookups and by the refresh loop, which re-reads the list every
// Config.RefreshInterval (after a failure sooner, with the RetryMin..RetryMax
// backoff). New loads the high-water marks from Config.Marks first and
// returns an error when they cannot be read (a damaged file must stop the
// start rather than silently drop restore safety), for a nil store or for an
// invalid Config. ctx bounds the marks load and the first tag read. Call
// Close when done.
func New(ctx context.Context, st Store, cfg Config) (*Generator, error) {
	if st == nil {
		return nil, errors.New("segment: nil store")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Generator{st: st, cfg: cfg, clock: cfg.Clock, log: cfg.Logger, marks: cfg.Marks,
		misses: map[string]time.Time{}}
	g.highs = map[string]int64{}
	if g.marks != nil {
		m, err := g.marks.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("segment: load high-water marks: %w", err)
		}
		g.highs = m
		g.log.Info("segment: high-water marks loaded", "tags", len(m))
	}
	if cfg.MissLookupRate > 0 {
		g.limiter = rate.NewLimiter(rate.Limit(cfg.MissLookupRate), cfg.MissLookupBurst)
	}
	empty := map[string]*buffer{}
	g.cache.Store(&empty)
	g.root, g.cancel = context.WithCancel(context.Background())
	if err := g.Refresh(ctx); err != nil {
		g.log.Warn("segment: first tag refresh failed; serving known tags by miss lookup", "err", err)
	}
	g.spawn(g.refreshLoop)
	return g, nil
}

// Ready reports whether the tag list has been read successfully at least
// once (Leaf's initOK of the whole generator).
func (g *Generator) Ready() bool { return g.ready.Load() }

// Close stops the refresh loop and cancels the loads in flight, then waits
// for them and drops the buffered segments (Stats then shows none). Callers
// waiting in Get return ErrClosed, and so does every later Get or Tag.Get.
// Close is idempotent and always returns nil.
func (g *Generator) Close() error {
	g.goMu.Lock()
	if g.stopped {
		g.goMu.Unlock()
		return nil
	}
	g.stopped = true
	g.closed.Store(true)
	g.cancel()
	g.goMu.Unlock()
	g.wg.Wait()
	// Tag.Get's fast path does not read closed (that load cost about a
	// quarter of it): with cur gone it takes the slow path, which does.
	// No load runs any more, so nothing installs a segment after this.
	for _, b := range *g.cache.Load() {
		b.mu.Lock()
		b.clear()
		b.mu.Unlock()
	}
	return nil
}

// spawn runs f in a goroutine owned by g, unless g is closed.
func (g *Generator) spawn(f func()) bool {
	g.goMu.Lock()
	defer g.goMu.Unlock()
	if g.stopped {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// Get returns the next ID of tag, always > 0 and never handed out before by
// any generator sharing the database. tag is an opaque string: validating it
// is the caller's job. The fast path is one atomic add with
// no lock and ignores ctx. When the current segment is spent Get switches to
// the prefetched next one, or waits for the load in flight up to
// Config.WaitTimeout (Config.LoadTimeout for the first segment of a tag) and
// until ctx is done.
//
// Errors (see Code): ErrTagNotFound for a tag without a row (remembered for
// two seconds after a lookup found none, and for any tag not in the cache
// when miss lookups are disabled); ErrNoSegment when no segment is ready in
// time, the load failed, the tag is in backoff after a failure (wrapping
// the store error, or ctx's cause when ctx ended the wait), or the tag is
// not in the cache and the miss-lookup rate limit is spent (retry later);
// ErrNotInitialized when the tag is unknown, the tag list was never read and
// the database does not answer; ErrClosed after Close.
//
// A caller that asks for the same tag over and over saves the lookup of the
// tag (most of Get's time) with a handle from Generator.Tag.
func (g *Generator) Get(ctx context.Context, tag string) (int64, error) {
	// A cached tag skips lookup's call and closed check: after Close its
	// buffer holds no segment, so next ends in await's check.
	b := (*g.cache.Load())[tag]
	if b == nil {
		var err error
		if b, err = g.lookup(tag); err != nil {
			return 0, err
		}
	}
	return g.next(ctx, b, nil)
}

// lookup returns the buffer of tag: the cached one, or for a tag not in the
// cache a probe buffer, not yet loaded (see probe); ErrClosed after Close.
// It is Get's first half; Tag and a Tag whose buffer was dropped use it too.
func (g *Generator) lookup(tag string) (*buffer, error) {
	if g.closed.Load() {
		return nil, ErrClosed
	}
	if b := (*g.cache.Load())[tag]; b != nil {
		return b, nil
	}
	return g.probe(tag)
}

// next is Get's second half, shared with Tag.Get (t, nil for Get): the fast
// path, segment.take on the current segment, and slow for everything else.
// It is not inlined (too large); Tag.Get is, so a handle's Get costs one
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
	nb, err := g.lookup(t.tag)
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
// current segment with IDs left (Generator.Tag waiting for a miss lookup's
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
			wait := g.cfg.WaitTimeout
			if s == nil {
				wait = max(wait, g.cfg.LoadTimeout)
			}
			timer = time.NewTimer(wait)
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
			b.prev = seen
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
			return nil, fmt.Errorf("%w: %q: loads failing, next try in %v: %w", ErrNoSegment, b.tag, wait, b.lastErr)
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

// startLoad starts a load of the next (or, before initOK, the first)
// segment. It returns nil when the generator is closed. b.mu must be held.
//
// The step rule is Leaf's SegmentIDGenImpl.updateSegmentFromDb: the first
// load and the first prefetch take the row's step; afterwards the step
// doubles when the previous prefetch was less than GrowWindow ago (while
// twice it stays <= MaxStep), is kept below ShrinkWindow, and halves after
// that, never below the DB step. Deliberately unlike Leaf, a step below the
// DB step read by the previous load is raised to it, so that an operator who
// raises the step in the table sees it used ("never below the DB step").
func (g *Generator) startLoad(b *buffer) *loadCall {
	call := &loadCall{done: make(chan struct{})}
	first := !b.initOK
	var step int64 // 0: the row's own step
	if !first && !b.updated.IsZero() {
		step = b.step
		switch d := g.clock.Now().Sub(b.updated); {
		case d < g.cfg.GrowWindow:
			if step <= g.cfg.MaxStep/2 {
				step *= 2
			}
		case d < g.cfg.ShrinkWindow:
		default:
			if step/2 >= b.minStep {
				step /= 2
			}
		}
		step = max(step, b.minStep, 1)
	}
	if !g.spawn(func() { g.load(b, call, first, step) }) {
		return nil
	}
	b.load = call
	b.setPending(true)
	return call
}

// load runs one allocation and installs the segment: as cur for the first
// load, as next otherwise. An accepted segment's max_id becomes the tag's
// high-water mark, stored through Config.Marks before the segment is
// installed, so that no ID of it is handed out before the mark is durable.
// A tag with a mark first has its max_id checked against the mark
// (Store.MaxID). Config.OnLoad hears of the load before its waiters are
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
	case err == nil:
		b.known.Store(true)
		b.highMax = max(b.highMax, seg.max) // a refresh may have raised it meanwhile
		if b.refusing {
			b.refusing = false
			g.log.Warn("segment: tag serves again: max_id is at or above the high-water mark",
				"biz_tag", b.tag, "segment", fmt.Sprintf("[%d, %d)", seg.start, seg.max), "high_water", high)
		}
		b.failures = 0
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
			b.updated = now
			b.next = seg
		}
	case errors.Is(err, store.ErrTagNotFound):
		b.totalFailures++
		b.lastErr = err
		b.remove()
		drop, missing = true, true
		b.setPending(false)
		call.err = fmt.Errorf("%w: %q", ErrTagNotFound, b.tag)
	case errors.Is(err, ErrRewound):
		// The row exists (it allocated) and the tag must stay visible as
		// refusing, so even a miss-lookup buffer is kept.
		b.refusing = true
		b.failures++
		b.totalFailures++
		b.lastErr = err
		backoff := g.backoff(b.failures, g.cfg.RefuseRetryMax)
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
		b.failures++
		b.totalFailures++
		b.lastErr = err
		ceiling := g.cfg.RetryMax
		if b.refusing {
			ceiling = g.cfg.RefuseRetryMax
		}
		backoff := g.backoff(b.failures, ceiling)
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
				"first", first, "failures", b.failures, "retry_in", backoff, "refusing", b.refusing, "err", err)
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

// errMarkNotStored wraps a Marks.Store failure. The segment is not served:
// after a crash the mark on disk would be below IDs already handed out.
var errMarkNotStored = errors.New("high-water mark not stored, segment not served")

// storeMark makes maxID the high-water mark of tag: durable through
// Config.Marks first, then in memory for buffers created later.
func (g *Generator) storeMark(ctx context.Context, tag string, maxID int64) error {
	if g.marks != nil {
		if err := g.marks.Store(ctx, tag, maxID); err != nil {
			return fmt.Errorf("%w: %q at %d: %w", errMarkNotStored, tag, maxID, err)
		}
	}
	g.marksMu.Lock()
	g.highs[tag] = max(g.highs[tag], maxID)
	g.marksMu.Unlock()
	return nil
}

// checkMaxID returns ErrRewound when the max_id of tag is below high. A
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

// probe handles a tag not in the cache. A concurrent miss of the same tag
// may have added a probe buffer already: join it, so concurrent misses share
// one allocation and one limiter token. A tag a load found without a row
// less than missTTL ago is ErrTagNotFound at once, without a token.
// Otherwise, if the limiter allows, add a probe buffer, whose first load
// (started by the caller's slow path like any first use) confirms the row or
// drops the buffer. A refused lookup is ErrNoSegment (retryable), not
// ErrTagNotFound: nobody looked. With miss lookups disabled the cache is the
// tag list, as in Leaf, and a tag not in it is ErrTagNotFound.
func (g *Generator) probe(tag string) (*buffer, error) {
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	old := *g.cache.Load()
	if b := old[tag]; b != nil {
		return b, nil
	}
	now := g.clock.Now()
	if at, ok := g.misses[tag]; ok {
		if now.Sub(at) < missTTL {
			return nil, fmt.Errorf("%w: %q", ErrTagNotFound, tag)
		}
		delete(g.misses, tag)
	}
	if g.limiter == nil || !g.limiter.AllowN(now, 1) {
		switch {
		case !g.ready.Load():
			return nil, fmt.Errorf("%w: tag list not read yet, %q unknown", ErrNotInitialized, tag)
		case g.limiter == nil:
			return nil, fmt.Errorf("%w: %q", ErrTagNotFound, tag)
		}
		return nil, fmt.Errorf("%w: %q: not in the cache and the miss-lookup rate limit is spent; retry later",
			ErrNoSegment, tag)
	}
	b := g.newBuffer(tag)
	b.probe = true
	m := maps.Clone(old)
	if m == nil {
		m = map[string]*buffer{}
	}
	m[tag] = b
	g.cache.Store(&m)
	return b, nil
}

func (g *Generator) newBuffer(tag string) *buffer {
	g.marksMu.Lock()
	high := g.highs[tag]
	g.marksMu.Unlock()
	return &buffer{tag: tag, seq: g.bufSeq.Add(1), highMax: high}
}

// drop removes b from the cache if it is still the buffer of its tag. With
// missing (a load found no row) the tag is remembered in misses, unless
// another buffer of it is cached by now.
func (g *Generator) drop(b *buffer, missing bool) {
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	old := *g.cache.Load()
	if missing && (old[b.tag] == nil || old[b.tag] == b) {
		g.rememberMiss(b.tag)
	}
	if old[b.tag] != b {
		return
	}
	m := maps.Clone(old)
	delete(m, b.tag)
	g.cache.Store(&m)
}

// rememberMiss records that a load found no row for tag. Expired entries are
// swept when the map is full; a tag that finds it still full is not
// remembered. g.cacheMu must be held.
func (g *Generator) rememberMiss(tag string) {
	now := g.clock.Now()
	if len(g.misses) >= maxMisses {
		for t, at := range g.misses {
			if now.Sub(at) >= missTTL {
				delete(g.misses, t)
			}
		}
		if len(g.misses) >= maxMisses {
			return
		}
	}
	g.misses[tag] = now
}

// Refresh re-reads the tag list now (the refresh loop does it every
// Config.RefreshInterval): new tags get a buffer, loaded on first use; tags
// no longer in the table are dropped and answer ErrTagNotFound. On error the
// cache is left as it was. A successful empty list empties the cache: the
// query answered, so the table is empty. Tags added by a miss lookup after
// the list was read are kept. Refresh is safe for concurrent use; calls are
// serialised.
func (g *Generator) Refresh(ctx context.Context) error {
	g.refreshMu.Lock()
	defer g.refreshMu.Unlock()
	seq := g.bufSeq.Load()
	ctx, cancel := context.WithTimeout(ctx, g.cfg.LoadTimeout)
	defer cancel()
	rows, err := g.st.Rows(ctx)
	if err != nil {
		return fmt.Errorf("segment: refresh tags: %w", err)
	}
	tags := make([]string, 0, len(rows))
	observed := make(map[string]int64, len(rows)) // max_id of every row
	for _, r := range rows {
		tags = append(tags, r.BizTag)
		observed[r.BizTag] = r.MaxID
	}
	g.cacheMu.Lock()
	old := *g.cache.Load()
	m := make(map[string]*buffer, len(tags))
	for _, t := range tags {
		b := old[t]
		if b == nil {
			b = g.newBuffer(t)
		}
		b.known.Store(true)
		m[t] = b
	}
	now := g.clock.Now()
	for t, at := range g.misses {
		if _, listed := m[t]; listed || now.Sub(at) >= missTTL {
			delete(g.misses, t)
		}
	}
	var gone []*buffer
	for t, b := range old {
		if _, ok := m[t]; ok {
			continue
		}
		if b.seq > seq {
			m[t] = b
			continue
		}
		gone = append(gone, b)
	}
	g.cache.Store(&m)
	g.cacheMu.Unlock()
	for _, b := range gone {
		b.mu.Lock()
		b.remove()
		b.mu.Unlock()
	}
	g.ready.Store(true)
	g.observe(ctx, observed, m)
	return nil
}

// observe raises the high-water marks to the max_id the refresh read from
// the table. Without it a server's mark only knows its own segments: a server
// that last allocated an hour ago would accept, after a restore, segments
// that other servers handed out since (per-server marks, SPEC §2). With it
// only segments allocated by others within the last refresh interval before
// a rewind escape the check. Raising a mark never refuses a legitimate
// segment: max_id only grows, so every later allocation starts at or above
// what was read. A failed Store is logged; the raised mark still holds in
// memory.
func (g *Generator) observe(ctx context.Context, observed map[string]int64, bufs map[string]*buffer) {
	raised := map[string]int64{}
	g.marksMu.Lock()
	for tag, v := range observed {
		// max_id 1 is a fresh row: no positive ID lies below it.
		if v > 1 && v > g.highs[tag] {
			raised[tag] = v
		}
	}
	g.marksMu.Unlock()
	if len(raised) == 0 {
		return
	}
	if g.marks != nil {
		if err := g.marks.StoreAll(ctx, raised); err != nil {
			g.log.Warn("segment: high-water marks read from the table not stored", "tags", len(raised), "err", err)
		}
	}
	g.marksMu.Lock()
	for tag, v := range raised {
		g.highs[tag] = max(g.highs[tag], v)
	}
	g.marksMu.Unlock()
	for tag, v := range raised {
		if b := bufs[tag]; b != nil {
			b.mu.Lock()
			b.highMax = max(b.highMax, v)
			b.mu.Unlock()
		}
	}
}

// refreshLoop re-reads the tag list every RefreshInterval; after a failure
// it retries sooner, with the load backoff (RetryMin doubling up to
// RetryMax), so that Ready turns true soon after the database comes back.
func (g *Generator) refreshLoop() {
	var failures int64
	if !g.ready.Load() {
		failures = 1
	}
	for {
		wait := g.cfg.RefreshInterval
		if failures > 0 {
			wait = min(wait, g.backoff(failures, g.cfg.RetryMax))
		}
		t := time.NewTimer(wait)
		select {
		case <-g.root.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := g.Refresh(g.root); err != nil {
			if g.root.Err() != nil {
				return
			}
			failures++
			g.log.Warn("segment: tag refresh failed; keeping the cache", "failures", failures, "err", err)
			continue
		}
		failures = 0
	}
}
