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
			return fmt.Errorf("%w: %q at %d: %w", errMarkNotStored, tag, maxID, err)
		}
	}
	g.marksMu.Lock()
	g.highs[tag] = max(g.highs[tag], maxID)
	g.own[tag] = max(g.own[tag], maxID)
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
