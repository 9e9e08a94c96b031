package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-go/leaf/store"
)

// Ordered tags (docs/contract.md §12): a tag with a leaf_ordered row
// ([store.Row.Ordered]) has no buffered segment. Its IDs increase in real
// time across every server sharing the database: if a Get returned before
// another Get of the same tag started, on any server, the second ID is
// larger (linearizable per tag).
//
// Each generator group-commits the requests waiting on the tag: one
// goroutine per tag (orderLoop) takes every request that arrived since its
// last allocation, reserves as many IDs as they asked for with one
// [Store.Allocate] of that custom step (UPDATE max_id = max_id + n and the
// read back, one transaction), and hands the range out in the order the
// requests were taken. Requests that arrive while an allocation is in flight
// wait for the next one, whose UPDATE starts after they arrived: that is what
// makes the order real-time (an allocation that began before a request
// arrived never serves it). Throughput therefore grows with concurrency: one
// database write per batch of concurrent requests, not per ID.
//
// A failed allocation fails its whole batch (no ID of it is handed out); the
// next request starts a new one. The high-water mark guards ordered tags as
// it guards segments ([ErrRewound]): an allocation starting below it is
// refused, and its max_id is stored through [Config.Marks] before any of its
// IDs is handed out.

// maxOrderedBatch bounds the IDs one ordered allocation reserves; requests
// past it wait for the next allocation (a batch request of the API is at
// most 10,000 IDs, so a burst of them is split rather than reserving
// millions at once).
const maxOrderedBatch = 100_000

// orderQueue is the group commit of one ordered tag.
type orderQueue struct {
	mu sync.Mutex // guards waiting and running
	// waiting are the requests for the next allocation, in arrival order.
	waiting []*orderWaiter
	// running is true while orderLoop runs for the tag.
	running bool

	// batches counts successful allocations, issued the IDs handed out;
	// lastMax and lastBatch are the max_id and size of the last one.
	batches, issued, lastMax, lastBatch atomic.Int64
}

// Waiter states: waiting for an allocation, taken into one (its IDs are
// reserved by the allocation under way), or abandoned by its caller
// (timeout, context) before it was taken, so no ID is reserved for it.
const (
	waiterWaiting int32 = iota
	waiterTaken
	waiterAbandoned
)

// orderWaiter is one request of n IDs on an ordered tag. first and err are
// set before done is closed and read only after.
type orderWaiter struct {
	n     int64
	state atomic.Int32
	done  chan struct{}
	first int64
	err   error
}

// orderedGet serves n consecutive IDs of the ordered tag of b and returns
// the first: it queues a request for the next allocation of the tag and
// waits for it up to [Config.WaitTimeout], ctx and Close.
func (g *Generator) orderedGet(ctx context.Context, b *buffer, q *orderQueue, n int64) (int64, error) {
	if g.closed.Load() {
		return 0, ErrClosed
	}
	w := &orderWaiter{n: n, done: make(chan struct{})}
	q.mu.Lock()
	q.waiting = append(q.waiting, w)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start && !g.spawn(func() { g.orderLoop(b, q) }) {
		return 0, ErrClosed
	}
	timer := time.NewTimer(g.cfg.WaitTimeout)
	defer timer.Stop()
	var cause error
	select {
	case <-w.done:
		return w.first, w.err
	case <-timer.C:
		cause = fmt.Errorf("%w: ordered %q: no allocation within the wait timeout %v", ErrNoSegment, b.tag, g.cfg.WaitTimeout)
	case <-ctx.Done():
		cause = fmt.Errorf("%w: ordered %q: %w", ErrNoSegment, b.tag, context.Cause(ctx))
	case <-g.root.Done():
		cause = ErrClosed
	}
	// Not taken yet: no ID is reserved for w. Taken: its IDs are reserved
	// but never handed out (skipped, as a failed batch's).
	w.state.CompareAndSwap(waiterWaiting, waiterAbandoned)
	return 0, cause
}

// orderLoop allocates for the tag of b while requests wait: each round takes
// every waiting request (up to maxOrderedBatch IDs) and serves them with one
// allocation. It returns when none waits.
func (g *Generator) orderLoop(b *buffer, q *orderQueue) {
	for {
		q.mu.Lock()
		var (
			batch []*orderWaiter
			total int64
			rest  = q.waiting[:0]
		)
		for i, w := range q.waiting {
			if total > 0 && total+w.n > maxOrderedBatch {
				rest = append(rest, q.waiting[i:]...)
				break
			}
			if w.state.CompareAndSwap(waiterWaiting, waiterTaken) {
				batch = append(batch, w)
				total += w.n
			}
		}
		clear(q.waiting[len(rest):])
		q.waiting = rest
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		g.allocateOrdered(b, q, batch, total)
	}
}

// allocateOrdered runs one allocation of total IDs for batch and answers
// every request of it: consecutive IDs in batch order, or the same error.
func (g *Generator) allocateOrdered(b *buffer, q *orderQueue, batch []*orderWaiter, total int64) {
	answer := func(err error) {
		for _, w := range batch {
			w.err = err
			close(w.done)
		}
	}
	if g.root.Err() != nil {
		answer(ErrClosed)
		return
	}
	b.mu.Lock()
	high := b.highMax
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(g.root, g.cfg.LoadTimeout)
	t0 := time.Now()
	var (
		alloc     store.Allocation
		seg       *segment
		err       error
		allocated bool
	)
	// As a load: a table rewound below the mark is refused by the
	// allocating statement, without burning anything.
	alloc, err = g.st.Allocate(ctx, b.tag, total, high)
	err = rewound(err)
	allocated = err == nil
	if err == nil {
		seg, err = checkAlloc(b.tag, alloc, total, high)
	}
	if err == nil && seg.size != total {
		// checkAlloc cut IDs below 1 off (a row with max_id < n): the
		// range is short. Hand out none of it rather than part.
		err = fmt.Errorf("ordered allocation [%d, %d) of %q holds %d positive IDs, %d asked", alloc.Start(), alloc.MaxID, b.tag, seg.size, total)
	}
	if err == nil {
		err = g.storeMark(ctx, b.tag, seg.max)
	}
	latency := time.Since(t0)
	cancel()
	if g.cfg.OnLoad != nil && !errors.Is(err, store.ErrTagNotFound) {
		g.cfg.OnLoad(LoadEvent{BizTag: b.tag, Latency: latency, Err: err, Known: allocated || b.known.Load()})
	}
	now := g.clock.Now()

	b.mu.Lock()
	drop, missing := false, false
	switch {
	case err == nil && b.removed:
		err = fmt.Errorf("%w: %q", ErrTagNotFound, b.tag)
	case err == nil:
		b.known.Store(true)
		b.highMax = max(b.highMax, seg.max)
		if b.refusing {
			b.refusing = false
			g.log.Warn("segment: ordered tag serves again: max_id is at or above the high-water mark",
				"biz_tag", b.tag, "allocation", fmt.Sprintf("[%d, %d)", seg.start, seg.max), "high_water", high)
		}
		if b.fail != nil {
			b.fail.failures = 0
		}
		b.initOK = true
		b.step, b.minStep = total, alloc.DBStep
		b.lastLoad, b.lastLatency = now, latency
	default:
		f := b.failed()
		f.failures++
		f.total++
		f.lastErr = err
		switch {
		case errors.Is(err, store.ErrTagNotFound):
			b.remove()
			drop, missing = true, true
			err = fmt.Errorf("%w: %q", ErrTagNotFound, b.tag)
		case errors.Is(err, ErrRewound):
			b.refusing = true
			g.log.Error("segment: refusing ordered tag: the database went back in time (restored backup or lagging replica)",
				"biz_tag", b.tag, "high_water", high,
				"fix", fmt.Sprintf("leafctl tag fence %s --min <highest high_water of all servers>", b.tag), "err", err)
			err = fmt.Errorf("%w: %w", ErrNoSegment, err)
		case b.probe && !b.known.Load():
			// A miss lookup whose first allocation failed: do not keep an
			// unconfirmed tag (as a load).
			b.remove()
			drop = true
			if !g.ready.Load() {
				err = fmt.Errorf("%w: ordered %q: %w", ErrNotInitialized, b.tag, err)
			} else {
				err = fmt.Errorf("%w: ordered %q: %w", ErrNoSegment, b.tag, err)
			}
		default:
			err = fmt.Errorf("%w: ordered %q: %w", ErrNoSegment, b.tag, err)
		}
		if g.root.Err() == nil && !errors.Is(err, ErrTagNotFound) {
			defer g.log.LogAttrs(context.Background(), slog.LevelWarn, "segment: ordered allocation failed",
				slog.String("biz_tag", b.tag), slog.Int("requests", len(batch)), slog.Int64("ids", total),
				slog.Any("err", err))
		}
	}
	b.mu.Unlock()
	if drop {
		g.drop(b, missing)
	}
	if err != nil {
		answer(err)
		return
	}
	q.batches.Add(1)
	q.issued.Add(total)
	q.lastMax.Store(seg.max)
	q.lastBatch.Store(total)
	next := seg.start
	for _, w := range batch {
		w.first = next
		next += w.n
		close(w.done)
	}
}

// setOrdered turns a cached buffer into an ordered tag's (ordered true) or
// a plain one's, when a refresh read a changed flag (an operator's SQL; the
// admin API and leafctl set it only at creation). A buffer that turns
// ordered drops its segments first (retired, so that a [Tag] handle holding
// one takes no more IDs from it): no buffered ID may be handed out after an
// ordered one. A load in flight installs nothing (load.go). Neither b.mu
// nor g.cacheMu may be held.
func (b *buffer) setOrdered(ordered bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !ordered && b.ord.Load() != nil:
		b.ord.Store(nil)
		b.setPending(b.load != nil) // the next use loads a first segment
		b.initOK = false
	case ordered && b.ord.Load() == nil:
		b.clear()
		b.ord.Store(&orderQueue{})
	}
}

// fill sets the parts of st that differ for an ordered tag:
// Segments[0] shows the last allocation ([max_id-n, max_id), all handed
// out), Step its size n, Issued the IDs handed out. b.mu must be held.
func (q *orderQueue) fill(st *BufferStats) {
	st.Ordered = true
	st.Issued += q.issued.Load()
	st.Batches = q.batches.Load()
	if m := q.lastMax.Load(); m != 0 {
		st.Segments[0] = SegmentStats{Value: m, Max: m, Step: q.lastBatch.Load()}
	}
	st.Pos = 0
	st.Remaining = 0
	q.mu.Lock()
	st.Loading = q.running
	st.Waiting = int64(len(q.waiting))
	q.mu.Unlock()
}

// GetN fills ids with IDs of tag, in increasing order: the batch routes.
// For an ordered tag the whole batch is one request of the next allocation,
// so every ID is larger than any ID handed out before GetN was called; for a
// plain tag it is len(ids) calls of [Generator.Get]. On error the IDs taken so far are skipped, never handed
// out later. Errors are [Generator.Get]'s.
func (g *Generator) GetN(ctx context.Context, tag string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	b := (*g.cache.Load())[tag]
	if b == nil {
		var err error
		if b, err = g.lookup(ctx, tag); err != nil {
			return err
		}
	}
	if q := b.ord.Load(); q != nil {
		first, err := g.orderedGet(ctx, b, q, int64(len(ids)))
		if err != nil {
			return err
		}
		for i := range ids {
			ids[i] = first + int64(i)
		}
		return nil
	}
	for i := range ids {
		id, err := g.next(ctx, b, nil)
		if err != nil {
			return err
		}
		ids[i] = id
	}
	return nil
}
