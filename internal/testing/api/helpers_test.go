package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/buildinfo"
	"github.com/leaf-go/leaf/internal/metrictest"
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
		Build: buildinfo.Info{Version: "v0.0.0-test", Commit: "0123456789abcdef", GoVersion: "go1.26.8"},
	}))
	t.Cleanup(srv.Close)
	return &opsServer{srv: srv, reg: reg, gen: gen, st: st}
}

func (s *opsServer) get(t *testing.T, path string) answer {
	t.Helper()
	return do(t, "GET", s.srv.URL+path)
}

// The series readers live in internal/metrictest (shared with the other
// module's api tests).
var (
	tagsOf = metrictest.TagsOf
	value  = metrictest.Value
)
