package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// benchTag is the tag the bench tests load; its small step makes a run cross
// many segments and database allocations.
const benchTag = "bench"

// leafServer is a real leaf-go HTTP handler on a loopback port: the api
// package's router over a segment generator on SQLite and a snowflake
// generator, as leaf-server wires them.
type leafServer struct {
	url string
	gen *segment.Generator
}

func newLeafServer(t *testing.T) leafServer {
	t.Helper()
	ctx := context.Background()
	st, err := dsn.Open(ctx, dbtest.SQLite(t), true)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Create(ctx, store.Row{BizTag: benchTag, MaxID: 1, Step: 100}); err != nil {
		t.Fatalf("Create(%q): %v", benchTag, err)
	}
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { gen.Close() })
	sf, err := snowflake.New(ctx, snowflake.Settings{WorkerID: 7})
	if err != nil {
		t.Fatalf("snowflake.New: %v", err)
	}
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st, Snowflake: sf}))
	t.Cleanup(srv.Close)
	return leafServer{url: srv.URL, gen: gen}
}

// benchJSON runs leafctl bench --json with args and decodes the result.
func benchJSON(t *testing.T, args ...string) (benchResult, outcome) {
	t.Helper()
	out := leafctl(t, opts{}, append([]string{"bench", "--json"}, args...)...)
	var r benchResult
	if err := json.Unmarshal([]byte(out.stdout), &r); err != nil {
		t.Fatalf("leafctl bench %q: stdout is not JSON (%v): %q, error %v", args, err, out.stdout, out.err)
	}
	return r, out
}

func TestBenchRealServer(t *testing.T) {
	srv := newLeafServer(t)
	tests := []struct {
		name     string
		give     []string
		wantURL  string
		wantReqs int64 // 0: bounded by --duration
	}{
		{"segment requests", []string{"--mode", "segment", "--tag", benchTag, "--concurrency", "8", "--requests", "3000"}, "/api/segment/get/bench", 3000},
		{"segment duration", []string{"--mode", "segment", "--tag", benchTag, "--concurrency", "16", "--duration", "300ms"}, "/api/segment/get/bench", 0},
		{"snowflake requests", []string{"--mode", "snowflake", "--concurrency", "8", "--requests", "3000", "--batch", "1"}, "/api/snowflake/get/leaf-segment-test", 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			r, out := benchJSON(t, append(tt.give, "--server", srv.url)...)
			if out.err != nil {
				t.Fatalf("bench %q: %v (exit %d)", tt.give, out.err, out.code)
			}
			if r.URL != srv.url+tt.wantURL {
				t.Errorf("bench %q URL = %s, want %s", tt.give, r.URL, srv.url+tt.wantURL)
			}
			if r.Failed != 0 || r.Duplicates != 0 || r.IDs != r.OK || r.OK == 0 {
				t.Errorf("bench %q = %d ok, %d failed (%v), %d IDs, %d duplicates; want all ok and unique", tt.give, r.OK, r.Failed, r.ErrorExamples, r.IDs, r.Duplicates)
			}
			if tt.wantReqs > 0 && r.Requests != tt.wantReqs {
				t.Errorf("bench %q made %d requests, want exactly %d", tt.give, r.Requests, tt.wantReqs)
			}
			if tt.wantReqs == 0 && (r.Elapsed < 300*time.Millisecond || time.Since(start) > 5*time.Second) {
				t.Errorf("bench %q ran %v (wall %v), want about 300ms", tt.give, r.Elapsed, time.Since(start))
			}
			l := r.Latency
			if r.RequestsPerS <= 0 || r.IDsPerS != r.RequestsPerS || l.P50 <= 0 || l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
				t.Errorf("bench %q rate %.0f/s, IDs %.0f/s, latency %+v; want positive and ordered", tt.give, r.RequestsPerS, r.IDsPerS, l)
			}
		})
	}

	// The human-readable report.
	out := leafctl(t, opts{}, "bench", "--server", srv.url, "--tag", benchTag, "--requests", "500", "--concurrency", "4")
	if out.err != nil {
		t.Fatalf("bench: %v", out.err)
	}
	for _, want := range []string{"requests    500 (500 ok, 0 failed)", "requests/s", "IDs/s", "p50 ", "p90 ", "p99 ", "p999 ", "max ", "unique      500 IDs, no duplicates", "errors      none"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("bench report lacks %q:\n%s", want, out.stdout)
		}
	}
}

// TestBenchBatchRealServer runs the batch mode against the api package's
// batch routes, which another change adds; until then the routes answer 404
// and the test skips.
func TestBenchBatchRealServer(t *testing.T) {
	srv := newLeafServer(t)
	resp, err := http.Get(srv.url + "/api/v1/segment/" + benchTag + "?count=2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		t.Skipf("GET /api/v1/segment/{tag}?count=N answers %d: the batch API is not in package api yet", resp.StatusCode)
	}
	for _, mode := range []string{modeSegment, modeSnowflake} {
		r, out := benchJSON(t, "--server", srv.url, "--mode", mode, "--tag", benchTag, "--batch", "250", "--requests", "200", "--concurrency", "8")
		if out.err != nil || r.IDs != 200*250 || r.Duplicates != 0 {
			t.Errorf("bench --mode %s --batch 250 = %d IDs, %d duplicates, %v (%v); want 50000 unique", mode, r.IDs, r.Duplicates, out.err, r.ErrorExamples)
		}
	}
}

// TestBenchBatchContract runs the batch mode against a handler that speaks
// the batch API's contract (GET /api/v1/segment/{tag}?count=N answering
// {"ids":["…",…]}) over the real segment generator, so that the batch client
// is tested end to end before package api serves the route.
func TestBenchBatchContract(t *testing.T) {
	srv := newLeafServer(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/segment/{tag}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("count"))
		if err != nil || n < 1 || n > 10000 {
			http.Error(w, `{"code":"bad_count"}`, http.StatusBadRequest)
			return
		}
		ids := make([]string, n)
		for i := range ids {
			id, err := srv.gen.Get(r.Context(), r.PathValue("tag"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			ids[i] = strconv.FormatInt(id, 10)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string][]string{"ids": ids})
	})
	contract := httptest.NewServer(mux)
	defer contract.Close()

	r, out := benchJSON(t, "--server", contract.URL, "--tag", benchTag, "--batch", "100", "--requests", "300", "--concurrency", "8")
	if out.err != nil || r.OK != 300 || r.IDs != 300*100 || r.Duplicates != 0 || math.Abs(r.IDsPerS-100*r.RequestsPerS) > 1e-9*r.IDsPerS {
		t.Errorf("bench --batch 100 = %d ok, %d IDs, %d duplicates, %v; want 300 ok, 30000 unique IDs", r.OK, r.IDs, r.Duplicates, out.err)
	}
	if want := contract.URL + "/api/v1/segment/bench?count=100"; r.URL != want {
		t.Errorf("bench --batch 100 URL = %s, want %s", r.URL, want)
	}
}

// TestBenchDuplicate checks that bench fails (exit 3) when a server hands out
// an ID twice. A real leaf-go server cannot be made to do that, so these
// httptest servers answer with deliberately repeated IDs: the fault is the
// point of the test.
func TestBenchDuplicate(t *testing.T) {
	tests := []struct {
		name    string
		give    []string
		handler func(n int64) string // body of the nth answer (from 1)
		wantDup string
	}{
		{"every answer the same", nil, func(int64) string { return "42" }, "42"},
		{"one repeat among many", nil, func(n int64) string {
			if n == 500 {
				return "7" // 7 was also the 7th answer
			}
			return strconv.FormatInt(n, 10)
		}, "7"},
		{"repeat inside a batch", []string{"--batch", "3"}, func(n int64) string {
			if n == 10 {
				return `{"ids":["1000","1001","1000"]}`
			}
			return fmt.Sprintf(`{"ids":["%d","%d","%d"]}`, 3*n, 3*n+1, 3*n+2)
		}, "1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var count atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = fmt.Fprint(w, tt.handler(count.Add(1)))
			}))
			defer srv.Close()
			args := append([]string{"bench", "--server", srv.URL, "--requests", "1000", "--concurrency", "4"}, tt.give...)
			out := leafctl(t, opts{}, args...)
			if out.code != exitDuplicate || !strings.Contains(out.err.Error(), "duplicate IDs") || !strings.Contains(out.err.Error(), tt.wantDup) {
				t.Errorf("bench %q = exit %d, %v; want exit 3 naming %s", tt.give, out.code, out.err, tt.wantDup)
			}
			if !strings.Contains(out.stdout, "DUPLICATES") {
				t.Errorf("bench report does not show the duplicates:\n%s", out.stdout)
			}
		})
	}
}

func TestBenchFailures(t *testing.T) {
	leafError := `{"timestamp":1,"status":500,"error":"Internal Server Error","exception":"com.sankuai.inf.leaf.server.exception.LeafServerException","message":"Result{id=-2, status=EXCEPTION}","path":"/api/segment/get/bench"}`
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		wantCode int
		wantKind string // key of the errors map
		wantMsg  string // in the error
	}{
		{"every request 500", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, leafError, http.StatusInternalServerError)
		}, exitFailure, "500", "all 200 requests failed"},
		{"Java Leaf disabled mode answers 0", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprint(w, "0")
		}, exitFailure, "bad body", "all 200 requests failed"},
		{"not a number", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprint(w, "<html>")
		}, exitFailure, "bad body", "all 200 requests failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			r, out := benchJSON(t, "--server", srv.URL, "--requests", "200", "--concurrency", "4")
			if out.code != tt.wantCode || !strings.Contains(out.err.Error(), tt.wantMsg) || r.Errors[tt.wantKind] != 200 || r.ErrorExamples[tt.wantKind] == "" {
				t.Errorf("bench = exit %d, %v, errors %v; want exit %d, %q, 200 × %s", out.code, out.err, r.Errors, tt.wantCode, tt.wantMsg, tt.wantKind)
			}
		})
	}

	t.Run("some requests fail", func(t *testing.T) {
		var n atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			i := n.Add(1)
			if i%10 == 0 {
				http.Error(w, leafError, http.StatusInternalServerError)
				return
			}
			_, _ = fmt.Fprint(w, i)
		}))
		defer srv.Close()
		out := leafctl(t, opts{}, "bench", "--server", srv.URL, "--requests", "100", "--concurrency", "1")
		if out.err != nil || !strings.Contains(out.stdout, "requests    100 (90 ok, 10 failed)") || !strings.Contains(out.stdout, "errors      500: 10 (first: ") {
			t.Errorf("bench with 10%% errors = %v, report:\n%s\nwant success with 10 errors by status", out.err, out.stdout)
		}
	})

	t.Run("server down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		r, out := benchJSON(t, "--server", "http://"+addr, "--requests", "20", "--concurrency", "2")
		if out.code != exitFailure || r.Errors["transport"] != 20 {
			t.Errorf("bench against a closed port = exit %d, %v, errors %v; want exit 1 with 20 transport errors", out.code, out.err, r.Errors)
		}
	})
}

// TestBenchBounded checks that bench stops at --duration, and on
// cancellation (Ctrl-C), even when the server never answers.
func TestBenchBounded(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)

	start := time.Now()
	r, out := benchJSON(t, "--server", srv.URL, "--duration", "200ms", "--timeout", "1m")
	if took := time.Since(start); took > 5*time.Second || out.code != exitFailure || r.Requests != 0 {
		t.Errorf("bench --duration 200ms against a hung server took %v, exit %d, %v, %d requests; want ~200ms, exit 1, none counted", took, out.code, out.err, r.Requests)
	}

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	var stdout bytes.Buffer
	root := newRoot(env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stdout, getenv: func(string) string { return "" }})
	root.SetArgs([]string{"bench", "--server", srv.URL, "--duration", "1h", "--json"})
	start = time.Now()
	err := root.ExecuteContext(ctx)
	if took := time.Since(start); took > 5*time.Second || err == nil || !strings.Contains(stdout.String(), `"interrupted": true`) {
		t.Errorf("bench --duration 1h cancelled after 200ms took %v, %v, output %q; want a prompt interrupted report", took, err, stdout.String())
	}
}

func TestBenchUsage(t *testing.T) {
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"--mode", "zookeeper"}, `--mode "zookeeper"`},
		{[]string{"--concurrency", "0"}, "--concurrency must be at least 1"},
		{[]string{"--requests", "-1"}, "--requests must not be negative"},
		{[]string{"--batch", "-1"}, "--batch must not be negative"},
		{[]string{"--duration", "0s"}, "--duration must be positive"},
		{[]string{"--server", "ftp://x"}, `--server "ftp://x"`},
		{[]string{"--server", "localhost:8080"}, `--server "localhost:8080"`},
		{[]string{"--tag", ""}, "1 to 128 characters"},
		{[]string{"extra"}, "takes no arguments"},
	}
	for _, tt := range tests {
		out := leafctl(t, opts{}, append([]string{"bench"}, tt.give...)...)
		if out.code != exitUsage || !strings.Contains(out.err.Error(), tt.want) {
			t.Errorf("bench %q = exit %d, %v; want exit 2 with %q", tt.give, out.code, out.err, tt.want)
		}
	}
}

func TestBenchServerFromEnvironment(t *testing.T) {
	srv := newLeafServer(t)
	out := leafctl(t, opts{vars: map[string]string{"LEAF_SERVER": srv.url + "/"}}, "bench", "--tag", benchTag, "--requests", "10")
	if out.err != nil || !strings.Contains(out.stdout, "target      "+srv.url+"/api/segment/get/bench") {
		t.Errorf("bench with LEAF_SERVER = %v, report:\n%s", out.err, out.stdout)
	}
}

func TestParseID(t *testing.T) {
	tests := []struct {
		give   string
		want   int64
		wantOK bool
	}{
		{"1", 1, true},
		{"0", 0, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"9223372036854775808", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1 ", 0, false},
		{"1e3", 0, false},
	}
	for _, tt := range tests {
		if got, ok := parseID([]byte(tt.give)); got != tt.want || ok != tt.wantOK {
			t.Errorf("parseID(%q) = %d, %v; want %d, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseIDs(t *testing.T) {
	indented, _ := json.MarshalIndent(map[string][]string{"ids": {"1", "9223372036854775807"}}, "", "  ")
	tests := []struct {
		give   string
		want   []int64
		wantOK bool
	}{
		{`{"ids":["1","2","3"]}`, []int64{1, 2, 3}, true},
		{`{"ids":[]}`, nil, true},
		{string(indented), []int64{1, 9223372036854775807}, true},
		{` { "ids" : [ "5" , "6" ] } `, []int64{5, 6}, true},
		{`{"tag":"ids","ids":["8"]}`, []int64{8}, true},
		{`{"ids":["1"],"count":1}`, []int64{1}, true},
		{`{"ids":[1,2]}`, nil, false},
		{`{"ids":["1",]}`, nil, false},
		{`{"ids":["1"`, nil, false},
		{`{"ids":["-1"]}`, nil, false},
		{`{"ids":["9223372036854775808"]}`, nil, false},
		{`{"id":["1"]}`, nil, false},
		{`{"ids":"1"}`, nil, false},
		{``, nil, false},
	}
	for _, tt := range tests {
		got, ok := parseIDs([]byte(tt.give), nil)
		if ok != tt.wantOK || ok && !slices.Equal(got, tt.want) {
			t.Errorf("parseIDs(%q) = %v, %v; want %v, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}

func FuzzParseIDs(f *testing.F) {
	for _, s := range []string{`{"ids":["1","2","3"]}`, `{"ids":[]}`, `{"tag":"ids","ids":["8"]}`, `{"ids":["1",]}`, `{"ids":["9223372036854775808"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ids, ok := parseIDs(body, nil)
		if !ok {
			return
		}
		// Whatever it accepted re-encodes to an answer it reads the same.
		strs := make([]string, len(ids))
		for i, id := range ids {
			if id < 0 {
				t.Fatalf("parseIDs(%q) gave negative ID %d", body, id)
			}
			strs[i] = strconv.FormatInt(id, 10)
		}
		again, _ := json.Marshal(map[string][]string{"ids": strs})
		if got, ok := parseIDs(again, nil); !ok || !slices.Equal(got, ids) {
			t.Fatalf("parseIDs(%q) = %v, but its re-encoding %q gives %v, %v", body, ids, again, got, ok)
		}
	})
}

func TestPercentile(t *testing.T) {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		give float64
		want time.Duration
	}{
		{0.50, 500 * time.Millisecond},
		{0.90, 900 * time.Millisecond},
		{0.99, 990 * time.Millisecond},
		{0.999, 999 * time.Millisecond},
		{1, 1000 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(lat, tt.give); got != tt.want {
			t.Errorf("percentile(1..1000ms, %v) = %v, want %v", tt.give, got, tt.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil, 0.5) = %v, want 0", got)
	}
}

// BenchmarkWorkerOne measures one bench request against a loopback server
// that answers a fixed body, next to a bare net/http client loop: the ratio
// is leafctl's overhead per request.
func BenchmarkWorkerOne(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("1234567890123"))
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/segment/get/x", nil)

	b.Run("leafctl", func(b *testing.B) {
		b.ReportAllocs()
		w := &benchWorker{client: client, want: 1}
		for b.Loop() {
			w.one(context.Background(), req)
			w.ids = w.ids[:0]
			w.lat = w.lat[:0]
		}
		if w.failed != 0 {
			b.Fatalf("%d requests failed: %v", w.failed, w.examples)
		}
	})
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
		}
	})
}

func TestDuplicates(t *testing.T) {
	tests := []struct {
		name         string
		give         [][]int64 // sorted runs
		wantN        int64
		wantExamples []string
	}{
		{"none", nil, 0, []string{}},
		{"unique across runs", [][]int64{{1, 4}, {}, {2, 3, 5}}, 0, []string{}},
		{"across runs", [][]int64{{1, 2, 3}, {2, 4}, {2, 5}}, 2, []string{"2"}},
		{"within a run", [][]int64{{1, 1, 1}}, 2, []string{"1"}},
		{"several", [][]int64{{1, 3, 9}, {3, 9}, {9}}, 3, []string{"3", "9"}},
		{"limit", [][]int64{{1, 2, 3, 4}, {1, 2, 3, 4}}, 4, []string{"1", "2"}},
		{"extremes", [][]int64{{0, 9223372036854775807}, {9223372036854775807}}, 1, []string{"9223372036854775807"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ex := duplicates(tt.give, 2)
			if n != tt.wantN || !slices.Equal(ex, tt.wantExamples) {
				t.Errorf("duplicates(%v) = %d, %q; want %d, %q", tt.give, n, ex, tt.wantN, tt.wantExamples)
			}
		})
	}
}
