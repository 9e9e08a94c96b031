package segment

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Miss lookups: a tag not in the cache is looked up in the database before
// a buffer is made for it (docs/contract.md §2.3). Three rules keep a flood
// of unknown names from starving the lookups of real new tags:
//
//   - negative cache: a name found without a row answers [ErrTagNotFound]
//     from memory for missTTL (at most maxMisses names);
//   - one query for many names: the names that miss within missWindow of
//     each other are answered by one read of leaf_alloc ([Store.Rows]); while
//     it runs, the next names gather for the next read, so at most one
//     lookup query is in flight whatever the rate of misses;
//   - a limit per client: each client (the address [WithClient] put into the
//     request's context; "" for callers that set none) has its own token
//     bucket of [Config.MissLookupRate] per second and
//     [Config.MissLookupBurst]; a client past it gets [ErrMissLimited], and
//     other clients' lookups go on.
//
// A request waits for its lookup at most [Config.WaitTimeout] (and until its
// context ends); a found tag then loads its first segment like any first
// use.
const (
	missTTL   = 2 * time.Second
	maxMisses = 1024
	// missWindow is how long a lookup waits for other names to share its
	// query.
	missWindow = 5 * time.Millisecond
	// maxMissClients bounds the per-client limiters kept; past it, limiters
	// at full burst (idle clients) are dropped, and if none is, new clients
	// share one limiter.
	maxMissClients = 4096
)

type clientKey struct{}

// WithClient returns a copy of ctx naming the client of the request, for the
// per-client miss-lookup limit: an address the caller trusts (leaf-server
// passes the TCP peer's IP, never a forwarded header). "" is the client of
// every call without one.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

func clientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}

// overflowClient is the limiter key shared by new clients once
// maxMissClients limiters are busy.
const overflowClient = "\x00overflow"

// missLookups holds the per-client limiters and the batch of names waiting
// for the next lookup query.
type missLookups struct {
	mu       sync.Mutex // guards every field below
	limiters map[string]*rate.Limiter
	// pending gathers the names of the next query; nil when none waits.
	// inflight is the query under way; nil when none is.
	pending, inflight *missBatch
	// running is true while missLoop runs (gathering or querying).
	running bool
}

// missBatch is one lookup query: the names asked, and once done is closed,
// which of them have a row, or the query's error.
type missBatch struct {
	names map[string]struct{}
	done  chan struct{}
	// found maps each name with a row to whether it is an ordered tag
	// (read in the same query).
	found map[string]bool
	err   error
}

// probe handles a tag not in the cache; see the rules above. A tag found
// gets a probe buffer, whose first load (started by the caller's slow path
// like any first use) allocates its segment; concurrent misses of the same
// tag share it. With miss lookups disabled the cache is the tag list, as in
// Leaf, and a tag not in it is [ErrTagNotFound].
func (g *Generator) probe(ctx context.Context, tag, client string) (*buffer, error) {
	if b, err := g.probeCached(tag); b != nil || err != nil {
		return b, err
	}
	if g.cfg.MissLookupRate < 0 {
		if !g.ready.Load() {
			return nil, fmt.Errorf("%w: tag list not read yet, %q unknown", ErrNotInitialized, tag)
		}
		return nil, fmt.Errorf("%w: %q", ErrTagNotFound, tag)
	}
	// A name already asked for joins that query without a token.
	batch := g.asked(tag)
	if batch == nil {
		if client == "" {
			client = clientOf(ctx)
		}
		if !g.allowMiss(client) {
			if !g.ready.Load() {
				return nil, fmt.Errorf("%w: tag list not read yet, %q unknown", ErrNotInitialized, tag)
			}
			return nil, fmt.Errorf("%w: %q is not in the cache and this client's lookups of unknown tags (%g/s, burst %d) are spent; retry later",
				ErrMissLimited, tag, g.cfg.MissLookupRate, g.cfg.MissLookupBurst)
		}
		batch = g.joinMiss(tag)
	}
	timer := time.NewTimer(g.cfg.WaitTimeout)
	defer timer.Stop()
	select {
	case <-batch.done:
	case <-timer.C:
		return nil, fmt.Errorf("%w: lookup of %q not answered within the wait timeout %v", ErrNoSegment, tag, g.cfg.WaitTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: lookup of %q: %w", ErrNoSegment, tag, context.Cause(ctx))
	case <-g.root.Done():
		return nil, ErrClosed
	}
	if batch.err != nil {
		if !g.ready.Load() {
			return nil, fmt.Errorf("%w: look up %q: %w", ErrNotInitialized, tag, batch.err)
		}
		return nil, fmt.Errorf("%w: look up %q: %w", ErrNoSegment, tag, batch.err)
	}
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	old := *g.cache.Load()
	if b := old[tag]; b != nil {
		return b, nil
	}
	ordered, found := batch.found[tag]
	if !found {
		g.rememberMiss(tag)
		return nil, fmt.Errorf("%w: %q", ErrTagNotFound, tag)
	}
	b := g.newBuffer(tag)
	b.probe = true
	if ordered { // ordered.go; b is not shared yet
		b.ord.Store(&orderQueue{})
	}
	m := maps.Clone(old)
	if m == nil {
		m = map[string]*buffer{}
	}
	m[tag] = b
	g.cache.Store(&m)
	return b, nil
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
	if at, ok := g.misses[tag]; ok {
		if g.clock.Now().Sub(at) < missTTL {
			return nil, fmt.Errorf("%w: %q", ErrTagNotFound, tag)
		}
		delete(g.misses, tag)
	}
	return nil, nil
}

// allowMiss takes one token of client's miss-lookup limiter.
func (g *Generator) allowMiss(client string) bool {
	now := g.clock.Now()
	m := &g.miss
	m.mu.Lock()
	defer m.mu.Unlock()
	lim := m.limiters[client]
	if lim == nil {
		if len(m.limiters) >= maxMissClients {
			for c, l := range m.limiters {
				if l.TokensAt(now) >= float64(g.cfg.MissLookupBurst) {
					delete(m.limiters, c)
				}
			}
			if len(m.limiters) >= maxMissClients {
				client = overflowClient
			}
		}
		if lim = m.limiters[client]; lim == nil {
			lim = rate.NewLimiter(rate.Limit(g.cfg.MissLookupRate), g.cfg.MissLookupBurst)
			m.limiters[client] = lim
		}
	}
	return lim.AllowN(now, 1)
}

// asked returns the batch, waiting or under way, that already asks for
// tag, or nil.
func (g *Generator) asked(tag string) *missBatch {
	m := &g.miss
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range []*missBatch{m.pending, m.inflight} {
		if b != nil {
			if _, ok := b.names[tag]; ok {
				return b
			}
		}
	}
	return nil
}

// joinMiss adds tag to the batch of the next lookup query, starting missLoop
// if it is not running, and returns the batch.
func (g *Generator) joinMiss(tag string) *missBatch {
	m := &g.miss
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		m.pending = &missBatch{names: map[string]struct{}{}, done: make(chan struct{})}
	}
	b := m.pending
	b.names[tag] = struct{}{}
	if !m.running {
		m.running = true
		if !g.spawn(g.missLoop) {
			m.running, m.pending = false, nil
			b.err = ErrClosed
			close(b.done)
		}
	}
	return b
}

// missLoop runs lookup queries while names are waiting: it lets missWindow
// pass so that names missing together share a query, takes the batch, reads
// leaf_alloc once (bounded by [Config.LoadTimeout]) and answers every name of
// it. It returns when no name waits, or when the generator is closed.
func (g *Generator) missLoop() {
	m := &g.miss
	for {
		t := time.NewTimer(missWindow)
		select {
		case <-t.C:
		case <-g.root.Done():
			t.Stop()
		}
		m.mu.Lock()
		b := m.pending
		m.pending, m.inflight = nil, b
		if b == nil {
			m.running = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		if g.root.Err() != nil {
			b.err = ErrClosed
			close(b.done)
			continue // answers any batch that joined meanwhile, then returns
		}
		ctx, cancel := context.WithTimeout(g.root, g.cfg.LoadTimeout)
		rows, err := g.st.Rows(ctx)
		cancel()
		found := map[string]bool{}
		for _, r := range rows {
			if _, ok := b.names[r.BizTag]; ok {
				found[r.BizTag] = r.Ordered
			}
		}
		m.mu.Lock()
		b.found, b.err, m.inflight = found, err, nil
		m.mu.Unlock()
		close(b.done)
	}
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

// rememberMiss records that a lookup or load found no row for tag. Expired
// entries are swept when the map is full; a tag that finds it still full is
// not remembered. g.cacheMu must be held.
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
