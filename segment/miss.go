package segment

import (
	"fmt"
	"maps"
	"time"
)

// A tag that a load found without a row answers [ErrTagNotFound] from memory
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

// probe handles a tag not in the cache. A concurrent miss of the same tag
// may have added a probe buffer already: join it, so concurrent misses share
// one allocation and one limiter token. A tag a load found without a row
// less than missTTL ago is [ErrTagNotFound] at once, without a token.
// Otherwise, if the limiter allows, add a probe buffer, whose first load
// (started by the caller's slow path like any first use) confirms the row or
// drops the buffer. A refused lookup is [ErrNoSegment] (retryable), not
// [ErrTagNotFound]: nobody looked. With miss lookups disabled the cache is the
// tag list, as in Leaf, and a tag not in it is [ErrTagNotFound].
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
