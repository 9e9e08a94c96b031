package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// runBench runs the load and measures it. It returns when the duration has
// passed, the request budget is spent or ctx is cancelled, whichever comes
// first; requests in flight then are cancelled and not counted.
func runBench(ctx context.Context, c benchConfig) *benchResult {
	tr := &http.Transport{
		Proxy:               nil, // measure the server, not a proxy from the environment
		DialContext:         (&net.Dialer{Timeout: c.timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        c.concurrency,
		MaxIdleConnsPerHost: c.concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: c.timeout}

	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if c.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, c.duration)
	}
	defer cancel()

	var budget *atomic.Int64
	if c.requests > 0 {
		budget = new(atomic.Int64)
		budget.Store(c.requests)
	}
	target := c.url()
	workers := make([]*benchWorker, c.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		w := &benchWorker{client: client, want: c.perRequest(), batch: c.batch > 1}
		workers[i] = w
		wg.Go(func() { w.loop(runCtx, target, budget) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Sort each worker's IDs in parallel; summarise merges the sorted runs
	// without copying them into one slice, so the check needs no second
	// copy of what may be tens of millions of IDs.
	for _, w := range workers {
		wg.Go(func() { slices.Sort(w.ids) })
	}
	wg.Wait()
	return summarise(c, target, elapsed, ctx.Err() != nil, workers)
}

// benchWorker makes one request at a time and keeps what it saw; only its
// own goroutine touches it until the run ends.
type benchWorker struct {
	client *http.Client
	want   int  // IDs per successful answer
	batch  bool // the answer is {"ids":[…]} rather than a bare decimal

	body bytes.Buffer // reused for every answer

	ok, failed int64
	lat        []time.Duration // of completed requests
	ids        []int64
	errs       map[string]int64
	examples   map[string]string
}

// loop runs requests until ctx ends or the shared budget (nil: none) is
// spent.
func (w *benchWorker) loop(ctx context.Context, target string, budget *atomic.Int64) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		w.fail("transport", err.Error())
		return
	}
	for ctx.Err() == nil {
		if budget != nil && budget.Add(-1) < 0 {
			return
		}
		// The client forks req per request (it has a timeout) and never
		// modifies it, so one request value serves the whole loop.
		w.one(ctx, req)
	}
}

// one makes one request and records its outcome.
func (w *benchWorker) one(ctx context.Context, req *http.Request) {
	start := time.Now()
	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			w.lat = append(w.lat, time.Since(start))
			w.fail("transport", err.Error())
		}
		return
	}
	w.body.Reset()
	_, err = w.body.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		if ctx.Err() == nil {
			w.lat = append(w.lat, time.Since(start))
			w.fail("transport", err.Error())
		}
		return
	}
	w.lat = append(w.lat, time.Since(start))
	body := w.body.Bytes()
	if resp.StatusCode != http.StatusOK {
		w.fail(strconv.Itoa(resp.StatusCode), string(body[:min(len(body), 300)]))
		return
	}
	n := len(w.ids)
	var ok bool
	if w.batch {
		w.ids, ok = parseIDs(body, w.ids)
	} else {
		var id int64
		id, ok = parseID(bytes.TrimSpace(body))
		if ok {
			w.ids = append(w.ids, id)
		}
	}
	if ok && len(w.ids)-n != w.want {
		ok = false
	}
	for _, id := range w.ids[n:] {
		if id <= 0 { // Java Leaf answers 200 "0" for a disabled mode
			ok = false
		}
	}
	if !ok {
		w.ids = w.ids[:n]
		w.fail("bad body", string(body[:min(len(body), 300)]))
		return
	}
	w.ok++
}

// fail counts a failed request of kind (an HTTP status, "transport" or
// "bad body") and keeps the first example of each kind.
func (w *benchWorker) fail(kind, example string) {
	w.failed++
	if w.errs == nil {
		w.errs, w.examples = map[string]int64{}, map[string]string{}
	}
	if w.errs[kind] == 0 {
		w.examples[kind] = example
	}
	w.errs[kind]++
}
