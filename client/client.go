// Package client is a Go client for leaf-go and for Meituan's Leaf.
//
// A Client hands out segment and snowflake IDs from a local double buffer per
// tag, filled through leaf-go's batch API (GET /api/v1/segment/{tag}?count=N,
// GET /api/v1/snowflake?count=N):
//
//	current batch  ──take one──▶ caller            (a mutex per tag, no I/O)
//	next batch     ◀──prefetch── one background refill per tag, started when
//	                             fewer than RefillAt×BatchSize IDs are left
//
// A caller that finds the buffer empty waits for the refill in flight,
// bounded by its context. Every request goes to the servers in rotation; a
// transport error or a 5xx answer (except an unknown tag) is retried on the
// next server, and a server that failed is tried last for a second.
//
// In single-ID mode (Options.LeafCompatible, or BatchSize 1) every call is
// one request to Leaf's own routes, /api/segment/get/{tag} and
// /api/snowflake/get/{key}, so the client also works against Java Leaf, which
// has no batch route.
//
// Buffered IDs are unique but not in order across goroutines, and a
// buffered snowflake ID carries the time it was made on the server, not the
// time it is handed out. IDs left in the buffers at Close are skipped, as
// IDs are when a Leaf server restarts.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the zero fields of Options.
const (
	// DefaultTimeout bounds each HTTP request.
	DefaultTimeout = 2 * time.Second
	// DefaultRetries is how many more attempts a call makes, on the next
	// servers, after a retryable failure.
	DefaultRetries = 2
	// DefaultBatchSize is how many IDs one refill asks for.
	DefaultBatchSize = 1000
	// DefaultRefillAt is the fill level, as a fraction of BatchSize, below
	// which the next batch is prefetched.
	DefaultRefillAt = 0.2
	// MaxBatchSize is the largest count leaf-go accepts by default.
	MaxBatchSize = 10_000
)

// Timing of failure handling.
const (
	// backoffBase is the wait before an attempt that goes back to a server
	// already tried in the same call; it doubles per such attempt, up to
	// backoffMax, with up to 50% random jitter added.
	backoffBase = 50 * time.Millisecond
	backoffMax  = time.Second
	// downFor is how long a server that failed is tried after the others.
	downFor = time.Second
	// prefetchBackoffMax bounds the pause of background prefetches after
	// failed refills (100 ms, doubling). A caller whose buffer is empty
	// starts a refill regardless.
	prefetchBackoffMax = 5 * time.Second
	// snowflakeKey is the {key} of /api/snowflake/get/{key}; Leaf ignores it.
	snowflakeKey = "leaf-go-client"
)

// Options configures a Client. The zero value means the defaults; each field
// says its unit, range and default. New rejects values out of range.
type Options struct {
	// Servers are more base URLs (http or https, optionally with a path
	// prefix) besides the one given to New. Requests rotate over all of
	// them and fail over from one to the next.
	Servers []string
	// HTTPClient sends the requests. Nil means a client of the package's own
	// whose transport keeps up to 64 idle connections per server (closed by
	// Close). Its own Timeout, if any, applies on top of Timeout.
	HTTPClient *http.Client
	// Timeout bounds each HTTP request (one attempt on one server).
	// Zero means DefaultTimeout (2 s); negative is an error.
	Timeout time.Duration
	// Retries is how many more attempts a call makes after a retryable
	// failure, each on the next server (going round again after a short
	// backoff when all were tried). Zero means DefaultRetries (2); a
	// negative value means no retries.
	Retries int
	// BatchSize is how many IDs one refill asks for, 1..MaxBatchSize (it
	// must not exceed the servers' configured maximum). Zero means
	// DefaultBatchSize (1000). 1 selects single-ID mode: one request per
	// ID to Leaf's routes, as for Java Leaf.
	BatchSize int
	// RefillAt is the fill level, as a fraction of BatchSize in (0, 1),
	// below which the next batch is prefetched in the background. Zero
	// means DefaultRefillAt (0.2).
	RefillAt float64
	// LeafCompatible forces single-ID mode on Leaf's routes
	// (/api/segment/get/{tag}, /api/snowflake/get/{key}) whatever
	// BatchSize says: the client never calls /api/v1. Use it for Java Leaf.
	LeafCompatible bool
}

// Client hands out segment and snowflake IDs. It is safe for concurrent use
// by any number of goroutines; Close it to stop its background refills.
type Client struct {
	servers   []*server
	hc        *http.Client
	ownHTTP   *http.Transport // closed by Close; nil for a caller's HTTPClient
	timeout   time.Duration
	retries   int
	batch     int // IDs per refill; 1 in single-ID mode
	low       int // prefetch when fewer than low IDs are buffered
	single    bool
	rotation  atomic.Uint64
	ctx       context.Context // cancelled by Close; parent of every refill
	cancel    context.CancelFunc
	closed    atomic.Bool // set under mu
	refills   sync.WaitGroup
	snowflake *buffer // nil in single-ID mode

	mu      sync.Mutex         // guards buffers, and closed with refills.Add
	buffers map[string]*buffer // segment buffers by tag
}

// server is one base URL and when it last failed.
type server struct {
	base      string       // without a trailing slash
	downUntil atomic.Int64 // unix ns before which it is tried last
}

// New returns a Client for the server at baseURL and opts.Servers. Errors: a
// URL that is not absolute http(s) with a host, or an Options field out of
// range. New makes no request.
func New(baseURL string, opts Options) (*Client, error) {
	c := &Client{
		hc:      opts.HTTPClient,
		timeout: opts.Timeout,
		retries: opts.Retries,
		batch:   opts.BatchSize,
		buffers: map[string]*buffer{},
	}
	for _, u := range append([]string{baseURL}, opts.Servers...) {
		base, err := parseBase(u)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, &server{base: base})
	}
	switch {
	case c.timeout < 0:
		return nil, fmt.Errorf("client: Timeout %v is negative", c.timeout)
	case c.timeout == 0:
		c.timeout = DefaultTimeout
	}
	switch {
	case c.retries < 0:
		c.retries = 0
	case c.retries == 0:
		c.retries = DefaultRetries
	}
	switch {
	case c.batch < 0 || c.batch > MaxBatchSize:
		return nil, fmt.Errorf("client: BatchSize %d is outside 1..%d", c.batch, MaxBatchSize)
	case c.batch == 0:
		c.batch = DefaultBatchSize
	}
	refillAt := opts.RefillAt
	switch {
	case refillAt < 0 || refillAt >= 1 || math.IsNaN(refillAt):
		return nil, fmt.Errorf("client: RefillAt %v is outside (0, 1)", refillAt)
	case refillAt == 0:
		refillAt = DefaultRefillAt
	}
	c.low = max(1, int(refillAt*float64(c.batch)))
	c.single = opts.LeafCompatible || c.batch == 1
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		c.ownHTTP = tr
		c.hc = &http.Client{Transport: tr}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if !c.single {
		c.snowflake = c.newBuffer("", route{
			path:      "/api/v1/snowflake?count=" + strconv.Itoa(c.batch),
			batch:     true,
			snowflake: true,
			count:     c.batch,
		})
	}
	return c, nil
}

// parseBase checks a server URL and returns it without a trailing slash.
func parseBase(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("client: server URL %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("client: server URL %q must be http(s)://host[:port][/prefix]", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// Segment returns the next ID of the biz_tag tag: from the local buffer in
// batch mode (waiting for a refill when it is empty, at most until ctx is
// done), or with one request in single-ID mode. The tag is sent
// path-escaped and taken whole by leaf-go (Java Leaf drops everything after
// its last dot).
//
// Errors: ErrInvalidTag without a request; an *Error matching ErrTagNotFound
// (not retried), ErrNotReady, ErrNotInitialized, ErrDisabled or
// ErrBatchUnsupported after every attempt failed; a transport error; ctx's
// error; ErrClosed after Close. All are wrapped with the tag.
func (c *Client) Segment(ctx context.Context, tag string) (int64, error) {
	if err := checkTag(tag); err != nil {
		return 0, fmt.Errorf("client: segment %q: %w", tag, err)
	}
	if c.closed.Load() {
		return 0, fmt.Errorf("client: segment %q: %w", tag, ErrClosed)
	}
	var (
		id  int64
		err error
	)
	if c.single {
		id, err = c.one(ctx, route{path: "/api/segment/get/" + escapeTag(tag), count: 1})
	} else {
		id, err = c.buffer(tag).take(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("client: segment %q: %w", tag, err)
	}
	return id, nil
}

// Snowflake returns a snowflake ID, from the local buffer in batch mode or
// with one request in single-ID mode. Consecutive IDs may come from
// different servers (worker IDs), so they are unique but not ordered.
//
// Errors: an *Error matching ErrNotReady (server clock behind), ErrDisabled
// or ErrBatchUnsupported after every attempt failed; a transport error;
// ctx's error; ErrClosed after Close.
func (c *Client) Snowflake(ctx context.Context) (int64, error) {
	if c.closed.Load() {
		return 0, fmt.Errorf("client: snowflake: %w", ErrClosed)
	}
	var (
		id  int64
		err error
	)
	if c.single {
		id, err = c.one(ctx, route{path: "/api/snowflake/get/" + snowflakeKey, snowflake: true, count: 1})
	} else {
		id, err = c.snowflake.take(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("client: snowflake: %w", err)
	}
	return id, nil
}

// Close stops the background refills, waits for them to end and closes the
// idle connections of the client's own transport. Callers waiting for a
// refill get ErrClosed; later calls get ErrClosed. Close is idempotent and
// always returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	already := c.closed.Swap(true)
	c.mu.Unlock()
	if already {
		return nil
	}
	c.cancel()
	c.refills.Wait()
	if c.ownHTTP != nil {
		c.ownHTTP.CloseIdleConnections()
	}
	return nil
}

// buffer returns the buffer of tag, creating it on first use.
func (c *Client) buffer(tag string) *buffer {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buffers[tag]
	if b == nil {
		b = c.newBuffer(tag, route{
			path:  "/api/v1/segment/" + escapeTag(tag) + "?count=" + strconv.Itoa(c.batch),
			batch: true,
			count: c.batch,
		})
		c.buffers[tag] = b
	}
	return b
}

// escapeTag escapes tag as one path segment. A tag with a '%' has every
// byte escaped: Go servers then keep the escaped form in URL.RawPath, so a
// router that hands over the raw segment and a server that unescapes it once
// more (leaf-go's api.ParseKey at the time of writing) still see the tag
// itself, not "%41" read as "A". Servers that decode once see the same tag
// either way.
func escapeTag(tag string) string {
	if !strings.Contains(tag, "%") {
		return url.PathEscape(tag)
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, 3*len(tag))
	for i := 0; i < len(tag); i++ {
		b = append(b, '%', hex[tag[i]>>4], hex[tag[i]&15])
	}
	return string(b)
}

// forget drops the buffer of an unknown tag, so that probing random tags
// does not grow the map, unless it was replaced meanwhile.
func (c *Client) forget(tag string, b *buffer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buffers[tag] == b {
		delete(c.buffers, tag)
	}
}

// goRefill runs f in a goroutine owned by the client, unless it is closed.
func (c *Client) goRefill(f func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.refills.Add(1)
	go func() {
		defer c.refills.Done()
		f(c.ctx)
	}()
	return true
}

// route is one kind of request.
type route struct {
	path      string // after the base URL, escaped, with the query
	batch     bool   // /api/v1 JSON answer, else Leaf's text/plain ID
	snowflake bool   // snowflake codes, else segment codes
	count     int    // IDs asked for
}

// one fetches a single ID.
func (c *Client) one(ctx context.Context, r route) (int64, error) {
	ids, err := c.call(ctx, r)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// call sends r to the servers in rotation until one answers with IDs, a
// non-retryable error comes back, 1+retries attempts were made or ctx is
// done. Servers that failed in the last second go last.
func (c *Client) call(ctx context.Context, r route) ([]int64, error) {
	order := c.order()
	var last error
	for a := 0; a <= c.retries; a++ {
		s := order[a%len(order)]
		if round := a / len(order); round > 0 {
			if err := sleep(ctx, backoff(round)); err != nil {
				return nil, fmt.Errorf("%w (last error: %v)", err, last)
			}
		}
		ids, err := c.attempt(ctx, s, r)
		if err == nil {
			s.downUntil.Store(0)
			return ids, nil
		}
		last = err
		if ctx.Err() != nil {
			return nil, err
		}
		if e := (*Error)(nil); errors.As(err, &e) && !e.retryable() {
			return nil, err
		}
		s.downUntil.Store(time.Now().Add(downFor).UnixNano())
	}
	if c.retries > 0 {
		return nil, fmt.Errorf("%d attempts failed, last: %w", c.retries+1, last)
	}
	return nil, last
}

// order returns the servers starting at the next in rotation, those that
// failed recently moved to the end.
func (c *Client) order() []*server {
	n := len(c.servers)
	if n == 1 {
		return c.servers
	}
	start := int(c.rotation.Add(1) % uint64(n))
	now := time.Now().UnixNano()
	up := make([]*server, 0, n)
	var down []*server
	for i := range n {
		s := c.servers[(start+i)%n]
		if s.downUntil.Load() > now {
			down = append(down, s)
		} else {
			up = append(up, s)
		}
	}
	return append(up, down...)
}

// backoff is the wait before going round the servers again for the round-th
// time: backoffBase doubled per round, at most backoffMax, plus jitter.
func backoff(round int) time.Duration {
	d := backoffBase << min(round-1, 8)
	d = min(d, backoffMax)
	return d + rand.N(d/2+1)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Body size limits: a batch of 10,000 IDs is about 220 kB.
const (
	maxIDBody    = 64
	maxBatchBody = 4 << 20
	maxErrorBody = 64 << 10
)

// attempt sends r to s once, bounded by the client's Timeout.
func (c *Client) attempt(ctx context.Context, s *server, r route) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+r.path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.base, err)
	}
	if r.batch {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.base, err)
	}
	defer func() {
		// Drain a little so that the connection can be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		resp.Body.Close()
	}()
	limit := int64(maxErrorBody)
	if resp.StatusCode == http.StatusOK {
		limit = maxIDBody
		if r.batch {
			limit = maxBatchBody
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", s.base, err)
	}
	if len(body) > int(limit) && resp.StatusCode == http.StatusOK {
		return nil, &Error{Status: resp.StatusCode, Server: s.base,
			Message: fmt.Sprintf("answer longer than %d bytes", limit)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, newError(r, s.base, resp.StatusCode, body)
	}
	if r.batch {
		return parseBatch(s.base, body, r.count)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
	if err != nil {
		return nil, &Error{Status: resp.StatusCode, Server: s.base,
			Message: fmt.Sprintf("answer %q is not a decimal ID", truncate(body))}
	}
	if id <= 0 {
		return nil, zeroID(s.base, id)
	}
	return []int64{id}, nil
}
