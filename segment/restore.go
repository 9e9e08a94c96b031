package segment

import (
	"context"
	"errors"
	"fmt"
)

// errMarkNotStored wraps a [Marks.Store] failure. The segment is not served:
// after a crash the mark on disk would be below IDs already handed out.
var errMarkNotStored = errors.New("high-water mark not stored, segment not served")

// storeMark makes maxID the high-water mark of tag: durable through
// [Config.Marks] first, then in memory for buffers created later.
func (g *Generator) storeMark(ctx context.Context, tag string, maxID int64) error {
	if g.marks != nil {
		if err := g.marks.Store(ctx, tag, maxID); err != nil {
			if ctx.Err() == nil { // a caller that gave up says nothing about the disk
				g.markFail.Store(&markFailure{tag: tag, maxID: maxID})
			}
			return fmt.Errorf("%w: %q at %d: %w", errMarkNotStored, tag, maxID, err)
		}
		g.markFail.Store(nil)
	}
	g.marksMu.Lock()
	g.highs[tag] = max(g.highs[tag], maxID)
	g.own[tag] = max(g.own[tag], maxID)
	g.marksMu.Unlock()
	return nil
}

// markFailure is a mark that [Marks.Store] failed to make durable.
type markFailure struct {
	tag   string
	maxID int64
}

// MarksErr returns nil when the high-water marks can be stored, so that new
// segments (a new tag's first, every tag's next) can be served. After a
// failed store (a full disk: the marks log cannot grow) it stores that mark
// again, once per call, and returns the error while that fails too, so that
// a server taken out of rotation for it finds out by itself that space was
// freed. Storing the mark again is harmless: it is the max_id of a segment
// the database already handed to this server, and max_id only grows. ctx
// bounds the write. /readyz calls it.
func (g *Generator) MarksErr(ctx context.Context) error {
	f := g.markFail.Load()
	if f == nil {
		return nil
	}
	if err := g.marks.Store(ctx, f.tag, f.maxID); err != nil {
		return fmt.Errorf("high-water marks cannot be stored, so new segments are refused: %w", err)
	}
	g.markFail.CompareAndSwap(f, nil)
	g.marksMu.Lock()
	g.highs[f.tag] = max(g.highs[f.tag], f.maxID)
	g.marksMu.Unlock()
	return nil
}

// observe raises the high-water marks to the max_id the refresh read from the
// table. Without it a server's mark only knows its own segments: a server
// that last allocated an hour ago would accept, after a restore, segments
// that other servers handed out since (per-server marks, docs/contract.md
// §2.6). With it only segments allocated by others within the last refresh
// interval before a rewind escape the check. Raising a mark never refuses a
// legitimate segment: max_id only grows, so every later allocation starts at
// or above what was read. A failed Store is logged; the raised mark still
// holds in memory.
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
