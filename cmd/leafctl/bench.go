package main

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaf-go/leaf/store"
)

// Bench modes, the values of --mode.
const (
	modeSegment   = "segment"
	modeSnowflake = "snowflake"
)

// benchConfig is one bench run.
type benchConfig struct {
	server      string        // base URL, no trailing slash
	mode        string        // modeSegment or modeSnowflake
	tag         string        // biz tag (segment) or key (snowflake single-ID route)
	concurrency int           // workers, each with one request in flight, >= 1
	duration    time.Duration // stop after this long; 0 means no time limit (requests > 0)
	requests    int64         // stop after this many requests; 0 means no count limit (duration > 0)
	batch       int           // IDs per request; 0 or 1 uses Leaf's single-ID route
	timeout     time.Duration // limit of one request
}

// url returns the URL every request of the run fetches.
func (c benchConfig) url() string {
	switch {
	case c.batch > 1 && c.mode == modeSegment:
		return c.server + "/api/v1/segment/" + url.PathEscape(c.tag) + "?count=" + strconv.Itoa(c.batch)
	case c.batch > 1:
		return c.server + "/api/v1/snowflake?count=" + strconv.Itoa(c.batch)
	default:
		return c.server + "/api/" + c.mode + "/get/" + url.PathEscape(c.tag)
	}
}

// perRequest is the number of IDs one successful request returns.
func (c benchConfig) perRequest() int { return max(c.batch, 1) }

// latencies are the percentiles of the completed requests' latencies.
type latencies struct {
	P50  time.Duration `json:"p50"`
	P90  time.Duration `json:"p90"`
	P99  time.Duration `json:"p99"`
	P999 time.Duration `json:"p999"`
	Max  time.Duration `json:"max"`
}

// benchResult is what a run measured. Durations are in nanoseconds in JSON.
type benchResult struct {
	URL         string        `json:"url"`
	Mode        string        `json:"mode"`
	Concurrency int           `json:"concurrency"`
	Batch       int           `json:"batch"`
	Elapsed     time.Duration `json:"elapsed"`
	Interrupted bool          `json:"interrupted"` // stopped by Ctrl-C/SIGTERM
	// Requests counts completed requests, OK plus Failed. Requests cut off
	// by the end of the run are not counted.
	Requests      int64             `json:"requests"`
	OK            int64             `json:"ok"`
	Failed        int64             `json:"failed"`
	RequestsPerS  float64           `json:"requests_per_second"`
	IDs           int64             `json:"ids"`
	IDsPerS       float64           `json:"ids_per_second"`
	Duplicates    int64             `json:"duplicates"`     // IDs seen more than once (each extra sighting counts)
	DuplicateIDs  []string          `json:"duplicate_ids"`  // up to 10 examples
	Errors        map[string]int64  `json:"errors"`         // by HTTP status, "transport" or "bad body"
	ErrorExamples map[string]string `json:"error_examples"` // the first message or body of each kind
	Latency       latencies         `json:"latency"`
}

func newBenchCmd(e env, g *globals) *cobra.Command {
	c := benchConfig{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench [--mode segment|snowflake] [--tag T] [--concurrency N] [--duration D | --requests N] [--batch N]",
		Short: "Load a running server over HTTP; print rates, latency percentiles, and check every ID is unique",
		Long: `Load a running server at --server with --concurrency workers, each with one
request in flight, until --duration has passed or --requests requests were
made (or Ctrl-C). It prints requests/s, IDs/s, errors by HTTP status and the
latency percentiles p50, p90, p99, p999 and max, and checks that no ID was
handed out twice.

--batch 0 or 1 uses Leaf's single-ID routes (/api/segment/get/{tag},
/api/snowflake/get/{tag}), which Java Leaf serves too; --batch N > 1 uses
leaf-go's batch API (/api/v1/segment/{tag}?count=N, /api/v1/snowflake?count=N).

It exits with 3 when an ID was seen twice and with 1 when no request
succeeded. --timeout bounds each request.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.server, c.timeout = strings.TrimRight(g.server, "/"), g.timeout
			if err := c.check(cmd); err != nil {
				return err
			}
			res := runBench(cmd.Context(), c)
			if asJSON {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else {
				res.write(e.stdout)
			}
			return res.verdict()
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.mode, "mode", modeSegment, "segment or snowflake")
	f.StringVar(&c.tag, "tag", "leaf-segment-test", "biz tag to load (segment); the key of the single-ID snowflake route")
	f.IntVar(&c.concurrency, "concurrency", 16, "workers, each with one request in flight")
	f.DurationVar(&c.duration, "duration", 10*time.Second, "how long to run (not applied with --requests unless given too)")
	f.Int64Var(&c.requests, "requests", 0, "stop after this many requests in total (0: run for --duration)")
	f.IntVar(&c.batch, "batch", 0, "IDs per request: 0 or 1 for Leaf's single-ID route, N > 1 for the batch API")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON (durations in nanoseconds)")
	return cmd
}

// check validates the flags.
func (c *benchConfig) check(cmd *cobra.Command) error {
	u, err := url.Parse(c.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--server %q: want http://host:port or https://host:port", c.server)
	}
	switch {
	case c.mode != modeSegment && c.mode != modeSnowflake:
		return usagef("--mode %q: want segment or snowflake", c.mode)
	case c.concurrency < 1:
		return usagef("--concurrency must be at least 1, got %d", c.concurrency)
	case c.requests < 0:
		return usagef("--requests must not be negative, got %d", c.requests)
	case c.batch < 0:
		return usagef("--batch must not be negative, got %d", c.batch)
	}
	if err := store.ValidateTag(c.tag); err != nil {
		return usagef("--tag: %w", err)
	}
	if c.requests > 0 && !cmd.Flags().Changed("duration") {
		c.duration = 0
	}
	if c.requests == 0 && c.duration <= 0 {
		return usagef("--duration must be positive, got %v", c.duration)
	}
	return nil
}

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

// summarise merges the workers' observations; each worker's ids must be
// sorted.
func summarise(c benchConfig, target string, elapsed time.Duration, interrupted bool, workers []*benchWorker) *benchResult {
	r := &benchResult{
		URL: target, Mode: c.mode, Concurrency: c.concurrency, Batch: c.perRequest(),
		Elapsed: elapsed, Interrupted: interrupted,
		Errors: map[string]int64{}, ErrorExamples: map[string]string{},
		DuplicateIDs: []string{},
	}
	var nLat int
	for _, w := range workers {
		nLat += len(w.lat)
	}
	lat := make([]time.Duration, 0, nLat)
	runs := make([][]int64, 0, len(workers))
	for _, w := range workers {
		r.OK += w.ok
		r.Failed += w.failed
		r.IDs += int64(len(w.ids))
		lat = append(lat, w.lat...)
		runs = append(runs, w.ids)
		for k, n := range w.errs {
			if r.Errors[k] == 0 {
				r.ErrorExamples[k] = w.examples[k]
			}
			r.Errors[k] += n
		}
		w.lat, w.ids = nil, nil
	}
	r.Requests = r.OK + r.Failed
	if s := elapsed.Seconds(); s > 0 {
		r.RequestsPerS = float64(r.Requests) / s
		r.IDsPerS = float64(r.IDs) / s
	}
	slices.Sort(lat)
	r.Latency = latencies{
		P50: percentile(lat, 0.50), P90: percentile(lat, 0.90), P99: percentile(lat, 0.99),
		P999: percentile(lat, 0.999), Max: percentile(lat, 1),
	}
	r.Duplicates, r.DuplicateIDs = duplicates(runs, 10)
	return r
}

// duplicates merges sorted runs of IDs and returns how many IDs repeat one
// seen before (an ID seen three times counts twice) and up to limit distinct
// examples. It uses no memory beyond a heap of the runs.
func duplicates(runs [][]int64, limit int) (int64, []string) {
	h := make(runHeap, 0, len(runs))
	for _, run := range runs {
		if len(run) > 0 {
			h = append(h, run)
		}
	}
	heap.Init(&h)
	var (
		n        int64
		examples = []string{}
		last     int64
		seen     bool // last is set
		noted    bool // last is among the examples
	)
	for len(h) > 0 {
		run := h[0]
		id := run[0]
		switch {
		case seen && id == last:
			n++
			if !noted && len(examples) < limit {
				examples = append(examples, strconv.FormatInt(id, 10))
				noted = true
			}
		default:
			last, seen, noted = id, true, false
		}
		if len(run) == 1 {
			heap.Pop(&h)
		} else {
			h[0] = run[1:]
			heap.Fix(&h, 0)
		}
	}
	return n, examples
}

// runHeap is a min-heap of non-empty sorted runs by their first ID.
type runHeap [][]int64

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i][0] < h[j][0] }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.([]int64)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// percentile returns the nearest-rank q-quantile of sorted (0 when empty).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// verdict is the run's error: errDuplicate when an ID was seen twice, a
// failure when no request succeeded, nil otherwise.
func (r *benchResult) verdict() error {
	switch {
	case r.Duplicates > 0:
		return fmt.Errorf("%w: %d IDs handed out more than once (e.g. %s)", errDuplicate, r.Duplicates, strings.Join(r.DuplicateIDs, ", "))
	case r.Requests == 0:
		return errors.New("bench: no request completed")
	case r.OK == 0:
		return fmt.Errorf("bench: all %d requests failed", r.Requests)
	}
	return nil
}

// write prints the human-readable report.
func (r *benchResult) write(w io.Writer) {
	fprintf(w, "target      %s (%s, %d workers, %d ID(s) per request)\n", r.URL, r.Mode, r.Concurrency, r.Batch)
	note := ""
	if r.Interrupted {
		note = " (interrupted)"
	}
	fprintf(w, "requests    %d (%d ok, %d failed) in %v%s\n", r.Requests, r.OK, r.Failed, r.Elapsed.Round(time.Millisecond), note)
	fprintf(w, "rate        %.1f requests/s, %.1f IDs/s\n", r.RequestsPerS, r.IDsPerS)
	l := r.Latency
	fprintf(w, "latency     p50 %v  p90 %v  p99 %v  p999 %v  max %v\n", round(l.P50), round(l.P90), round(l.P99), round(l.P999), round(l.Max))
	if r.Duplicates == 0 {
		fprintf(w, "unique      %d IDs, no duplicates\n", r.IDs)
	} else {
		fprintf(w, "unique      %d IDs, %d DUPLICATES (e.g. %s)\n", r.IDs, r.Duplicates, strings.Join(r.DuplicateIDs, ", "))
	}
	if len(r.Errors) == 0 {
		fprintf(w, "errors      none\n")
		return
	}
	kinds := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for i, k := range kinds {
		label := "errors"
		if i > 0 {
			label = ""
		}
		fprintf(w, "%-12s%s: %d (first: %s)\n", label, k, r.Errors[k], strconv.Quote(r.ErrorExamples[k]))
	}
}

// round shortens a latency for the report.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// parseID parses a positive or zero decimal int64 without allocating: only
// ASCII digits, at most 19 of them, no sign.
func parseID(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// idsKey is the member of a batch answer that holds the IDs.
var idsKey = []byte(`"ids"`)

// parseIDs appends the IDs of a batch answer, {"ids":["1","2",…]} (IDs as
// decimal strings, as leaf-go's batch API sends them), to dst without
// allocating beyond dst's growth. It reads the first "ids" member (a string
// "ids" followed by a colon) and ignores the rest of the object.
func parseIDs(body []byte, dst []int64) ([]int64, bool) {
	var b []byte
	for rest := body; ; {
		i := bytes.Index(rest, idsKey)
		if i < 0 {
			return dst, false
		}
		var ok bool
		if b, ok = expect(rest[i+len(idsKey):], ':'); ok {
			break
		}
		rest = rest[i+len(idsKey):]
	}
	b, ok := expect(b, '[')
	if !ok {
		return dst, false
	}
	if b, ok = expect(b, ']'); ok {
		return dst, true
	}
	for {
		if b, ok = expect(b, '"'); !ok {
			return dst, false
		}
		end := bytes.IndexByte(b, '"')
		if end < 0 {
			return dst, false
		}
		id, ok := parseID(b[:end])
		if !ok {
			return dst, false
		}
		dst = append(dst, id)
		b = b[end+1:]
		if rest, ok := expect(b, ','); ok {
			b = rest
			continue
		}
		_, ok = expect(b, ']')
		return dst, ok
	}
}

// expect skips JSON whitespace and then c, reporting whether c was there.
func expect(b []byte, c byte) ([]byte, bool) {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	if len(b) == 0 || b[0] != c {
		return b, false
	}
	return b[1:], true
}
