package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Generator hands out segment-mode IDs for every tag of a leaf_alloc table,
// as Leaf's SegmentIDGenImpl. All methods are safe for concurrent use. It owns
// a tag-refresh goroutine and the background loads; Close stops them.
type Generator struct {
	st    Store
	cfg   Config
	clock Clock
	log   *slog.Logger
	marks Marks // nil: marks are not persisted
	// miss runs the lookup rounds of tags not in the cache (miss.go).
	miss *Lookups[bool]

	// markFail is the last mark Marks.Store could not make durable, nil
	// once a later Store succeeded: while it is set, new segments are
	// refused (errMarkNotStored) and [Generator.MarksErr] says so.
	markFail atomic.Pointer[markFailure]

	marksMu sync.Mutex // guards highs, own and rets
	// highs is the high-water mark of every tag ever loaded or read from
	// Marks; it seeds new buffers, so that a tag dropped and re-created
	// lower is refused too.
	highs map[string]int64
	// own is, per tag, the highest max_id of a segment this generator
	// allocated itself (this run only): a tail return never explains a
	// max_id below it (see applyReturn).
	own map[string]int64
	// rets is, per tag, the seq of the last tail return (store.TailReturn)
	// this server made or applied, from Marks.Returns and later Lowers.
	rets map[string]int64
	// tails are the unused tails Close found, for ReturnTails.
	tails []tail

	// cache maps tag to buffer. It is copy-on-write: readers load the
	// pointer without a lock; writers hold cacheMu and store a new map.
	// Lock order: a buffer's mu before cacheMu; nothing takes a buffer's
	// mu while holding cacheMu.
	cache   atomic.Pointer[map[string]*buffer]
	cacheMu sync.Mutex // guards writes of cache, and misses
	// misses holds the tags a lookup or load found without a row: for
	// missTTL probe answers ErrTagNotFound for them without another lookup.
	misses MissCache
	// refreshTurn serialises Refresh calls so an older tag list never
	// overwrites a newer one: a 1-slot semaphore (a token in the channel
	// while a Refresh runs) rather than a mutex, so that a caller waiting
	// for its turn gives up with its context (a refresh stalled on a
	// black-holed connection holds the turn up to LoadTimeout).
	refreshTurn chan struct{}
	bufSeq      atomic.Uint64
	ready       atomic.Bool
	closed      atomic.Bool

	// root is cancelled by Close; every load and the refresh loop run under
	// it.
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
// [Config.RefreshInterval] (after a failure sooner, with the
// RetryMin..RetryMax backoff). New loads the high-water marks from
// [Config.Marks] first and returns an error when they cannot be read (a
// damaged file must stop the start rather than silently drop restore safety),
// for a nil store or for an invalid Config. ctx bounds the marks load and the
// first tag read. Call Close when done.
func New(ctx context.Context, st Store, cfg Config) (*Generator, error) {
	if st == nil {
		return nil, errors.New("segment: nil store")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Generator{st: st, cfg: cfg, clock: cfg.Clock, log: cfg.Logger, marks: cfg.Marks,
		refreshTurn: make(chan struct{}, 1)}
	g.highs, g.own, g.rets = map[string]int64{}, map[string]int64{}, map[string]int64{}
	if g.marks != nil {
		m, err := g.marks.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("segment: load high-water marks: %w", err)
		}
		g.highs = m
		if g.rets, err = g.marks.Returns(ctx); err != nil {
			return nil, fmt.Errorf("segment: load high-water marks: %w", err)
		}
		g.log.Info("segment: high-water marks loaded", "tags", len(m))
	}
	g.miss = NewLookups(g, g.findTags)
	empty := map[string]*buffer{}
	g.cache.Store(&empty)
	g.root, g.cancel = context.WithCancel(context.Background())
	if err := g.Refresh(ctx); err != nil {
		g.log.Warn("segment: first tag refresh failed; serving known tags by miss lookup", "err", err)
	}
	g.spawn(g.refreshLoop)
	return g, nil
}

// Config returns the generator's configuration with the defaults filled in
// (the Clock, Logger and timeouts in use), for code built on the generator,
// such as the group package, that follows its clock and bounds.
func (g *Generator) Config() Config { return g.cfg }

// Cached reports whether tag has a buffer in the generator's cache: it was
// listed by the last tag-list read or found by a miss lookup since, so
// [Generator.Tag] serves it without a miss lookup (which would answer
// [ErrTagNotFound] for a name whose miss was remembered just before it was
// created). Safe for concurrent use; takes no lock.
func (g *Generator) Cached(tag string) bool { return (*g.cache.Load())[tag] != nil }

// Ready reports whether the tag list has been read successfully at least
// once (Leaf's initOK of the whole generator).
func (g *Generator) Ready() bool { return g.ready.Load() }

// Close stops the refresh loop and cancels the loads in flight, then waits
// for them and drops the buffered segments (Stats then shows none). Callers
// waiting in Get return [ErrClosed], and so does every later Get or [Tag.Get].
// Dropping a segment stops its takes atomically, so the unused tail of every
// tag that Close records for [Generator.ReturnTails] is exact: no ID of it
// was or will be handed out. Close is idempotent and always returns nil.
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
	// Tag.Get's fast path does not read closed (one more load on every
	// call; see BenchmarkTagGet): with cur gone it takes the slow path,
	// which does.
	// No load runs any more, so nothing installs a segment after this.
	var tails []tail
	for _, b := range *g.cache.Load() {
		b.mu.Lock()
		cur, next := b.cur.Load(), b.next
		used := b.clear()
		b.mu.Unlock()
		if t, ok := unusedTail(b.tag, cur, next, used); ok {
			tails = append(tails, t)
		}
	}
	g.goMu.Lock()
	g.tails = tails
	g.goMu.Unlock()
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
