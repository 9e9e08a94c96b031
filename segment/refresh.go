package segment

import (
	"context"
	"fmt"
	"time"
)

// Refresh re-reads the tag list now (the refresh loop does it every
// [Config.RefreshInterval]): new tags get a buffer, loaded on first use; tags
// no longer in the table are dropped and answer [ErrTagNotFound]. On error the
// cache is left as it was. A successful empty list empties the cache: the
// query answered, so the table is empty. Tags added by a miss lookup after
// the list was read are kept. Refresh is safe for concurrent use; calls are
// serialised. ctx bounds the wait for the turn too: while another Refresh
// runs (the refresh loop's may be stalled on a database that does not
// answer, for up to [Config.LoadTimeout]), a caller whose ctx ends first
// gets an error wrapping ctx's cause and the cache is left as it was, so
// that no request waits past its own deadline (issue 16 item 7).
func (g *Generator) Refresh(ctx context.Context) error {
	select {
	case g.refreshTurn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("segment: refresh tags: waiting for the refresh under way: %w", context.Cause(ctx))
	}
	defer func() { <-g.refreshTurn }()
	seq := g.bufSeq.Load()
	ctx, cancel := context.WithTimeout(ctx, g.cfg.LoadTimeout)
	defer cancel()
	rows, err := g.st.Rows(ctx)
	if err != nil {
		return fmt.Errorf("segment: refresh tags: %w", err)
	}
	tags := make([]string, 0, len(rows))
	observed := make(map[string]int64, len(rows)) // max_id of every row
	var ordered map[string]bool                   // tags with a leaf_ordered row
	for _, r := range rows {
		tags = append(tags, r.BizTag)
		observed[r.BizTag] = r.MaxID
		if r.Ordered {
			if ordered == nil {
				ordered = map[string]bool{}
			}
			ordered[r.BizTag] = true
		}
	}
	g.cacheMu.Lock()
	old := *g.cache.Load()
	m := make(map[string]*buffer, len(tags))
	var flip []*buffer // cached buffers whose ordered flag changed (ordered.go)
	for _, t := range tags {
		b := old[t]
		switch {
		case b == nil:
			b = g.newBuffer(t)
			if ordered[t] {
				b.ord.Store(&orderQueue{}) // not shared yet: no segment to drop
			}
		case (b.ord.Load() != nil) != ordered[t]:
			flip = append(flip, b)
		}
		b.known.Store(true)
		m[t] = b
	}
	g.misses.forget(func(t string) bool { _, listed := m[t]; return listed })
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
	for _, b := range flip { // after cacheMu: setOrdered takes the buffer's lock
		b.setOrdered(ordered[b.tag])
	}
	for _, b := range gone {
		b.mu.Lock()
		b.remove()
		b.mu.Unlock()
	}
	g.ready.Store(true)
	// Returns first: a mark lowered to a returned tail is not raised again
	// by the max_id read (it is at least the mark).
	g.applyReturns(ctx, observed, m)
	g.observe(ctx, observed, m)
	return nil
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
