package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// buffer is the double buffer of one tag (or of snowflake): the batch being
// handed out and the prefetched next one. At most one refill is in flight.
type buffer struct {
	c   *Client
	tag string // "" for snowflake
	r   route  // the batch request that refills it

	mu       sync.Mutex // guards cur, next, load, failures, retryAt
	cur      []int64    // IDs not handed out yet, handed out from the front
	next     []int64    // the prefetched batch, nil when none
	load     *load      // the refill in flight, nil when none
	failures int        // refills failed in a row
	retryAt  time.Time  // no background prefetch before this after a failure
}

// load is one refill; err is set before done is closed.
type load struct {
	done chan struct{}
	err  error
}

func (c *Client) newBuffer(tag string, r route) *buffer {
	return &buffer{c: c, tag: tag, r: r}
}

// take hands out the next ID. With the buffer empty it waits for the refill
// in flight (starting one if none), until ctx is done; a failed refill's
// error goes to every caller that waited for it.
func (b *buffer) take(ctx context.Context) (int64, error) {
	for {
		b.mu.Lock()
		if len(b.cur) == 0 && len(b.next) > 0 {
			b.cur, b.next = b.next, nil
		}
		if len(b.cur) > 0 {
			id := b.cur[0]
			b.cur = b.cur[1:]
			if len(b.cur) < b.c.low && b.next == nil && b.load == nil && !time.Now().Before(b.retryAt) {
				b.startLocked()
			}
			b.mu.Unlock()
			return id, nil
		}
		l := b.load
		if l == nil {
			l = b.startLocked()
		}
		b.mu.Unlock()
		if l == nil {
			return 0, ErrClosed
		}
		select {
		case <-l.done:
			if l.err != nil {
				return 0, l.err
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// startLocked starts a refill and records it in b.load; nil when the client
// is closed. b.mu is held.
func (b *buffer) startLocked() *load {
	l := &load{done: make(chan struct{})}
	if !b.c.goRefill(func(ctx context.Context) { b.refill(ctx, l) }) {
		return nil
	}
	b.load = l
	return l
}

// refill fetches one batch and files it as the current or the next batch.
func (b *buffer) refill(ctx context.Context, l *load) {
	ids, err := b.c.call(ctx, b.r)
	if err != nil && ctx.Err() != nil {
		err = ErrClosed
	}
	b.mu.Lock()
	if err == nil {
		b.failures = 0
		b.retryAt = time.Time{}
		if len(b.cur) == 0 {
			b.cur = ids
		} else {
			b.next = ids
		}
	} else {
		b.failures++
		b.retryAt = time.Now().Add(min(100*time.Millisecond<<min(b.failures-1, 8), prefetchBackoffMax))
	}
	empty := len(b.cur) == 0 && b.next == nil
	l.err = err
	b.load = nil
	b.mu.Unlock()
	close(l.done)
	if empty && b.tag != "" && errors.Is(err, ErrTagNotFound) {
		b.c.forget(b.tag, b)
	}
}

// batchBody is the answer of the batch routes: {"ids":["1","2",…]}. Numbers
// are accepted too.
type batchBody struct {
	IDs []json.Number `json:"ids"`
}

// parseBatch reads a batch answer of at most count IDs, each > 0.
func parseBatch(server string, body []byte, count int) ([]int64, error) {
	bad := func(format string, args ...any) error {
		return &Error{Status: 200, Server: server, Message: fmt.Sprintf(format, args...)}
	}
	var bb batchBody
	if err := json.Unmarshal(body, &bb); err != nil {
		return nil, bad("batch answer %q: %v", truncate(body), err)
	}
	if len(bb.IDs) == 0 || len(bb.IDs) > count {
		return nil, bad("batch answer has %d IDs, want 1..%d", len(bb.IDs), count)
	}
	ids := make([]int64, len(bb.IDs))
	for i, s := range bb.IDs {
		n, err := s.Int64()
		if err != nil {
			return nil, bad("batch answer ID %q is not a 64-bit integer", s)
		}
		if n <= 0 {
			return nil, zeroID(server, n)
		}
		ids[i] = n
	}
	return ids, nil
}

// truncate shortens a body for an error message.
func truncate(b []byte) string {
	if len(b) > maxMessage {
		return string(b[:maxMessage]) + "…"
	}
	return string(b)
}
