package client

import (
	"context"
	"fmt"
)

// Ordered returns the next ID of an ordered tag (one created with `leafctl
// tag create NAME --ordered`; docs/contract.md §12) with one request to
// Leaf's route /api/segment/get/{tag}, never from the local buffer: a
// buffered ID would be older than IDs other clients got meanwhile. The ID is
// larger than every ID of the tag that any client received before Ordered
// was called, on any server. Failover and retries are Segment's: a retried
// request gets a fresh ID (the one of a lost answer is skipped), which keeps
// the order.
//
// Called for a plain tag, Ordered returns a unique ID of it, without the
// order (the server serves it from its segment). Errors are Segment's.
func (c *Client) Ordered(ctx context.Context, tag string) (int64, error) {
	if err := checkTag(tag); err != nil {
		return 0, fmt.Errorf("client: ordered %q: %w", tag, err)
	}
	if c.closed.Load() {
		return 0, fmt.Errorf("client: ordered %q: %w", tag, ErrClosed)
	}
	id, err := c.one(ctx, route{path: "/api/segment/get/" + escapeTag(tag), count: 1})
	if err != nil {
		return 0, fmt.Errorf("client: ordered %q: %w", tag, err)
	}
	return id, nil
}
