package segment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Miss lookups: a name not in the cache is looked up in the database before
// it is served (docs/contract.md §2.3): a plain tag in leaf_alloc by
// [Generator.Get], a grouped tag in leaf_group by the group package (through
// [Lookups] and [MissCache]). Their cost grows
// with the distinct names asked, not with requests, so that a flood of
// random names from one client cannot starve another client's new tag,
// whatever address either comes from (behind a proxy or NAT all share one);
// no per-client limit is kept:
//
//   - negative cache: a name found without a row answers [ErrTagNotFound]
//     (or the group package's ErrNotGrouped) from memory for missTTL; at most maxMisses names
//     are remembered (a name is at most 128 characters: under 2 MB);
//   - one round for many names: a name already asked joins that round; the
//     names that miss while a round runs (or within missWindow of the
//     first) are asked together by the next round, one
//     `SELECT … WHERE biz_tag IN (…)` per [store.FindChunk] names
//     ([Store.FindTags]), so at most one round per kind is in flight
//     whatever the rate of misses;
//   - a bound: at most maxPending names wait for the next round; a new name
//     past it gets [ErrMissLimited] (retry later).
//
// A request waits for its round at most [Config.WaitTimeout] (and until its
// context ends); a round's queries are bounded by [Config.LoadTimeout]. A
// tag found then loads its first segment like any first use.
const (
	missTTL   = time.Second
	maxMisses = 8192
	// missWindow is how long the first name of a round waits for other
	// names to share its query.
	missWindow = 5 * time.Millisecond
	// maxPending bounds the names waiting for the next round (each has a
	// request waiting for it).
	maxPending = 8192
)

// Lookups runs the lookup rounds of one kind of name (leaf_alloc tags,
// leaf_group declarations) by the rules above, on the goroutines of its
// [Generator] and bounded by its [Config.LoadTimeout] and
// [Config.WaitTimeout]. Make one with [NewLookups]; safe for concurrent use.
type Lookups[T any] struct {
	gen *Generator
	// find reads the rows of a round's names and returns what it found of
	// each.
	find func(ctx context.Context, names []string) (map[string]T, error)

	mu sync.Mutex // guards pending, inflight and running
	// pending gathers the names of the next round; nil when none waits.
	// inflight is the round under way; nil when none is.
	pending, inflight *lookupRound[T]
	// running is true while run runs (gathering or querying).
	running bool
}

// NewLookups returns the lookup rounds of a kind of name whose rows find
// reads (one call per round, with the round's names; it returns what it
// found of each, leaving out the names without a row). The rounds run on
// g's goroutines: after g is closed every lookup answers [ErrClosed]. The
// group package looks up leaf_group declarations with it.
func NewLookups[T any](g *Generator, find func(ctx context.Context, names []string) (map[string]T, error)) *Lookups[T] {
	return &Lookups[T]{gen: g, find: find}
}

// Find asks for name in a lookup round (the one that has it already, else
// the next) and waits for the answer, at most [Config.WaitTimeout] of the
// generator and until ctx ends; ok false means the round found no row of
// name. Errors: [ErrMissLimited] when too many names wait for the next
// round already (retry later); [ErrNoSegment] when the wait ended first
// (wrapping ctx's cause) or wrapping the round's error when find failed;
// [ErrClosed].
func (q *Lookups[T]) Find(ctx context.Context, name string) (v T, ok bool, err error) {
	r, err := q.ask(name)
	if err != nil {
		return v, false, err
	}
	return r.wait(ctx, q.gen, name)
}

// lookupRound is one round: the names asked, and once done is closed, what
// was found of them, or the round's error.
type lookupRound[T any] struct {
	names map[string]struct{}
	done  chan struct{}
	found map[string]T
	err   error
}

// ask returns the round that asks for name: the one waiting or under way
// that already has it, else the next one, started on g's goroutines if
// none runs. Errors: [ErrMissLimited] when maxPending names wait already.
func (q *Lookups[T]) ask(name string) (*lookupRound[T], error) {
	g := q.gen
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range []*lookupRound[T]{q.pending, q.inflight} {
		if r != nil {
			if _, ok := r.names[name]; ok {
				return r, nil
			}
		}
	}
	if q.pending == nil {
		q.pending = &lookupRound[T]{names: map[string]struct{}{}, done: make(chan struct{})}
	}
	r := q.pending
	if len(r.names) >= maxPending {
		return nil, fmt.Errorf("%w: %d names wait for the next lookup round", ErrMissLimited, len(r.names))
	}
	r.names[name] = struct{}{}
	if !q.running {
		q.running = true
		if !g.spawn(func() { q.run(g) }) {
			q.running, q.pending = false, nil
			r.err = ErrClosed
			close(r.done)
		}
	}
	return r, nil
}

// run runs rounds while names are waiting: it lets missWindow pass so that
// names missing together share a round, takes the pending round, runs find
// once (bounded by [Config.LoadTimeout]) and answers every name of it. It
// returns when no name waits, or when g is closed.
func (q *Lookups[T]) run(g *Generator) {
	for {
		t := time.NewTimer(missWindow)
		select {
		case <-t.C:
		case <-g.root.Done():
			t.Stop()
		}
		q.mu.Lock()
		r := q.pending
		q.pending, q.inflight = nil, r
		if r == nil {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if g.root.Err() != nil {
			r.err = ErrClosed
			close(r.done)
			continue // answers any round that gathered meanwhile, then returns
		}
		ctx, cancel := context.WithTimeout(g.root, g.cfg.LoadTimeout)
		found, err := q.find(ctx, slices.Collect(maps.Keys(r.names)))
		cancel()
		q.mu.Lock()
		r.found, r.err, q.inflight = found, err, nil
		q.mu.Unlock()
		close(r.done)
	}
}

// wait waits for r to answer name, at most [Config.WaitTimeout] and until
// ctx ends, and returns what it found of name (ok false: no row). Errors:
// [ErrNoSegment] when the wait ended first (wrapping ctx's cause), or
// wrapping r's error when the round failed; [ErrClosed].
func (r *lookupRound[T]) wait(ctx context.Context, g *Generator, name string) (v T, ok bool, err error) {
	timer := time.NewTimer(g.cfg.WaitTimeout)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
		return v, false, fmt.Errorf("%w: lookup of %q not answered within the wait timeout %v", ErrNoSegment, name, g.cfg.WaitTimeout)
	case <-ctx.Done():
		return v, false, fmt.Errorf("%w: lookup of %q: %w", ErrNoSegment, name, context.Cause(ctx))
	case <-g.root.Done():
		return v, false, ErrClosed
	}
	if r.err != nil {
		return v, false, fmt.Errorf("%w: look up %q: %w", ErrNoSegment, name, r.err)
	}
	v, ok = r.found[name]
	return v, ok, nil
}

// failed returns the error of r once r is done; nil while it runs (its
// fields are not to be read before done is closed).
func (r *lookupRound[T]) failed() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// MissCache is a negative cache: the names a lookup found without a row,
// with the time of the lookup, remembered for missTTL, at most maxMisses
// of them. It keeps two generations: names go into cur; when cur is
// missTTL old or holds maxMisses/2 names it becomes prev (the old prev is
// dropped whole), so that adding a name never sweeps the cache. A name may
// be forgotten early (then it is looked up again, batched with others).
// The zero value is empty and ready; it is not safe for concurrent use:
// its owner's mutex guards it.
type MissCache struct {
	cur, prev map[string]time.Time
	// since is when cur was started.
	since time.Time
}

// Has reports whether name was found without a row less than missTTL
// before now.
func (c *MissCache) Has(now time.Time, name string) bool {
	at, ok := c.cur[name]
	if !ok {
		at, ok = c.prev[name]
	}
	return ok && now.Sub(at) < missTTL
}

// Add remembers name as found without a row at now.
func (c *MissCache) Add(now time.Time, name string) {
	if c.cur == nil || now.Sub(c.since) >= missTTL || len(c.cur) >= maxMisses/2 {
		c.prev, c.cur, c.since = c.cur, make(map[string]time.Time), now
	}
	c.cur[name] = now
}

// forget drops the names for which drop returns true.
func (c *MissCache) forget(drop func(name string) bool) {
	for _, m := range []map[string]time.Time{c.cur, c.prev} {
		for t := range m {
			if drop(t) {
				delete(m, t)
			}
		}
	}
}

// len is the number of names held, expired ones included.
func (c *MissCache) len() int { return len(c.cur) + len(c.prev) }

// findTags is the find of the generator's lookup rounds: the names among
// names that have a leaf_alloc row, each with whether it is an ordered tag
// (a leaf_ordered row, read by the same query), so that a server discovers
// an ordered tag on its first request.
func (g *Generator) findTags(ctx context.Context, names []string) (map[string]bool, error) {
	return g.st.FindTags(ctx, names)
}

// probe handles a tag not in the cache; see the rules above. A tag found
// gets a probe buffer, whose first load (started by the caller's slow path
// like any first use) allocates its segment; concurrent misses of the same
// tag share it.
func (g *Generator) probe(ctx context.Context, tag string) (*buffer, error) {
	if b, err := g.probeCached(tag); b != nil || err != nil {
		return b, err
	}
	r, err := g.miss.ask(tag)
	if err != nil {
		if !g.ready.Load() {
			return nil, fmt.Errorf("%w: tag list not read yet, %q unknown", ErrNotInitialized, tag)
		}
		return nil, fmt.Errorf("%q is not in the cache: %w; retry later", tag, err)
	}
	_, found, err := r.wait(ctx, g, tag)
	if err != nil {
		if ferr := r.failed(); ferr != nil && !g.ready.Load() {
			return nil, fmt.Errorf("%w: look up %q: %w", ErrNotInitialized, tag, ferr)
		}
		return nil, err
	}
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	old := *g.cache.Load()
	if b := old[tag]; b != nil {
		return b, nil
	}
	if !found {
		g.misses.Add(g.clock.Now(), tag)
		return nil, fmt.Errorf("%w: %q", ErrTagNotFound, tag)
	}
	// One copy of the cache for every tag the round found (each has a
	// request waiting for it), not one per tag.
	m := make(map[string]*buffer, len(old)+len(r.found))
	maps.Copy(m, old)
	for t, ordered := range r.found {
		if m[t] == nil {
			b := g.newBuffer(t)
			b.probe = true
			// The lookup read its row: its loads, failed ones too, are
			// of a tag the store has (LoadEvent.Known).
			b.known.Store(true)
			if ordered { // ordered.go; b is not shared yet
				b.ord.Store(&orderQueue{})
			}
			m[t] = b
		}
	}
	g.cache.Store(&m)
	return m[tag], nil
}

// probeCached answers a miss from memory: the buffer of tag if one was added
// since the caller looked, [ErrTagNotFound] for a name found without a row
// less than missTTL ago, or nil, nil.
func (g *Generator) probeCached(tag string) (*buffer, error) {
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	if b := (*g.cache.Load())[tag]; b != nil {
		return b, nil
	}
	if g.misses.Has(g.clock.Now(), tag) {
		return nil, fmt.Errorf("%w: %q", ErrTagNotFound, tag)
	}
	return nil, nil
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
		g.misses.Add(g.clock.Now(), b.tag)
	}
	if old[b.tag] != b {
		return
	}
	m := maps.Clone(old)
	delete(m, b.tag)
	g.cache.Store(&m)
}
