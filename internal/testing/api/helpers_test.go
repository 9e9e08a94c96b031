package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// The helpers below are copies of those in api/api_test.go,
// api/methods_test.go and api/metrics_test.go that the tests of this
// package use; keep them in step.

// openStore opens (and migrates) the store at storeDSN, closed when the test
// ends, and creates the given rows in it.
func openStore(t *testing.T, storeDSN string, rows ...store.Row) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := dsn.Open(ctx, storeDSN, true)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	for _, r := range rows {
		if err := st.Create(ctx, r); err != nil {
			t.Fatalf("Create(%q): %v", r.BizTag, err)
		}
	}
	return st
}

type answer struct {
	status int
	ctype  string
	body   string
}

func do(t *testing.T, method, url string) answer {
	t.Helper()
	a := send(t, method, url, "")
	return answer{a.status, a.header.Get("Content-Type"), a.body}
}

type fullAnswer struct {
	status int
	header http.Header
	body   string
}

// send makes one request over loopback, with a bearer token unless token is
// empty, and returns the status, headers and body.
func send(t *testing.T, method, url, token string) fullAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatalf("NewRequest(%s %s): %v", method, url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return fullAnswer{resp.StatusCode, resp.Header, string(b)}
}

// opsServer is a handler with metrics on a fresh registry, wired as main
// wires it: the load metrics' Observe as segment.Config.OnLoad.
type opsServer struct {
	srv *httptest.Server
	reg *prometheus.Registry
	gen *segment.Generator
	st  store.Store
}

func newOpsServer(t *testing.T, storeDSN string, cfg segment.Config, rows ...store.Row) *opsServer {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, storeDSN, rows...)
	loads := api.NewLoadMetrics()
	cfg.OnLoad = loads.Observe
	gen, err := segment.New(ctx, st, cfg)
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { gen.Close() })
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	srv := httptest.NewServer(api.NewHandler(api.Deps{
		Segment: gen, Store: st, Registerer: reg, LoadMetrics: loads,
	}))
	t.Cleanup(srv.Close)
	return &opsServer{srv: srv, reg: reg, gen: gen, st: st}
}

func (s *opsServer) get(t *testing.T, path string) answer {
	t.Helper()
	return do(t, "GET", s.srv.URL+path)
}

// tagsOf returns, per metric family, the non-empty biz_tag values it has.
func tagsOf(t *testing.T, reg prometheus.Gatherer) map[string][]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "biz_tag" && l.GetValue() != "" && !slices.Contains(out[mf.GetName()], l.GetValue()) {
					out[mf.GetName()] = append(out[mf.GetName()], l.GetValue())
				}
			}
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// value returns the value of the series of name with exactly labels
// (name=value pairs), and whether it exists.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	want := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		want[pairs[i]] = pairs[i+1]
	}
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		if l.GetValue() != "" {
			got[l.GetName()] = l.GetValue()
		}
	}
	for k, v := range want {
		if v == "" {
			if _, ok := got[k]; ok {
				return false
			}
			continue
		}
		if got[k] != v {
			return false
		}
	}
	return len(got) == len(want)-countEmpty(want)
}

func countEmpty(m map[string]string) int {
	n := 0
	for _, v := range m {
		if v == "" {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
