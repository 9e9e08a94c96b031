package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ErrNotGrouped is matched by the *Error of Formatted and ParseFormatted for
// a tag that is not declared grouped (404 not_grouped). It is not retried.
var ErrNotGrouped = errors.New("client: biz tag is not grouped")

// Formatted returns n (1..MaxBatchSize) formatted IDs of a date-grouped tag,
// all of one period (GET /api/v1/segment/{tag}/formatted?count=n), in one
// request with the client's failover and retries; nothing is buffered.
// Errors: [ErrInvalidTag] without a request; *Error matching
// [ErrNotGrouped] (404), [ErrNotReady] (503, retried on the other servers
// first); an *Error with Status 409 and Code "width_exhausted" when the
// period used its template's width, or "period_pruned"; [ErrClosed].
func (c *Client) Formatted(ctx context.Context, tag string, n int) ([]string, error) {
	if err := checkTag(tag); err != nil {
		return nil, err
	}
	if n < 1 || n > MaxBatchSize {
		return nil, fmt.Errorf("client: count %d, want 1..%d", n, MaxBatchSize)
	}
	var ans struct {
		IDs []string `json:"ids"`
	}
	if err := c.callJSON(ctx, "/api/v1/segment/"+escapeTag(tag)+"/formatted?count="+strconv.Itoa(n), &ans); err != nil {
		return nil, err
	}
	if len(ans.IDs) != n {
		return nil, fmt.Errorf("client: asked for %d formatted IDs, got %d", n, len(ans.IDs))
	}
	return ans.IDs, nil
}

// FormattedID is a formatted ID read back by [Client.ParseFormatted].
type FormattedID struct {
	// BizTag is the grouped tag.
	BizTag string `json:"bizTag"`
	// Period is the period key (yyyyMMdd, yyyyMM or yyyy) and Row its
	// leaf_alloc row ("<tag>:<period>").
	Period string `json:"period"`
	Row    string `json:"row"`
	// Sequence is the ID's sequence within the period, from 1.
	Sequence int64 `json:"sequence,string"`
	// PeriodStart is the period's first instant in the tag's time zone.
	PeriodStart time.Time `json:"periodStart"`
}

// ParseFormatted reads a formatted ID of tag back into its period and
// sequence (GET /api/v1/segment/{tag}/parse/{id}). Errors: [ErrInvalidTag];
// *Error with Status 400 and Code "bad_id" for a string the tag's template
// cannot have made, [ErrNotGrouped].
func (c *Client) ParseFormatted(ctx context.Context, tag, id string) (FormattedID, error) {
	var out FormattedID
	if err := checkTag(tag); err != nil {
		return out, err
	}
	err := c.callJSON(ctx, "/api/v1/segment/"+escapeTag(tag)+"/parse/"+url.PathEscape(id), &out)
	return out, err
}

// callJSON GETs path from the servers in rotation, as call does for IDs,
// and decodes the JSON answer into v.
func (c *Client) callJSON(ctx context.Context, path string, v any) error {
	if c.closed.Load() {
		return ErrClosed
	}
	order := c.order()
	var last error
	for a := 0; a <= c.retries; a++ {
		s := order[a%len(order)]
		if round := a / len(order); round > 0 {
			if err := sleep(ctx, backoff(round)); err != nil {
				return fmt.Errorf("%w (last error: %v)", err, last)
			}
		}
		err := c.attemptJSON(ctx, s, path, v)
		if err == nil {
			s.downUntil.Store(0)
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return err
		}
		if e := (*Error)(nil); errors.As(err, &e) && !e.retryable() {
			return err
		}
		s.downUntil.Store(time.Now().Add(downFor).UnixNano())
	}
	return last
}

func (c *Client) attemptJSON(ctx context.Context, s *server, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.base, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", s.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBatchBody+1))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", s.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := newError(route{batch: true}, s.base, resp.StatusCode, body)
		if e.Code == "not_grouped" {
			e.kind = ErrNotGrouped
		}
		return e
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &Error{Status: resp.StatusCode, Server: s.base, Message: "answer is not the expected JSON: " + err.Error()}
	}
	return nil
}
