package api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/metrictest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

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

// The series readers live in internal/metrictest (shared with the other
// module's api tests).
var (
	tagsOf = metrictest.TagsOf
	value  = metrictest.Value
)

// perTagFamilies are the families every served tag must have.
var perTagFamilies = []string{
	"leaf_segment_ids_issued_total",
	"leaf_segment_step_ids",
	"leaf_segment_min_step_ids",
	"leaf_segment_current_idle_ids",
	"leaf_segment_buffered_ids",
	"leaf_segment_next_ready",
	"leaf_segment_consumption_rate_ids_per_second",
	"leaf_segment_runway_seconds",
	"leaf_segment_loads_total",
	"leaf_segment_last_load_timestamp_seconds",
	"leaf_segment_last_load_duration_seconds",
	"leaf_segment_rewound",
}

func TestMetricsOnlyForServedTags(t *testing.T) {
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{},
		store.Row{BizTag: "alpha", MaxID: 1, Step: 100},
		store.Row{BizTag: "beta", MaxID: 1000, Step: 50},
		store.Row{BizTag: "never-used", MaxID: 1, Step: 10})
	for range 30 {
		if got := s.get(t, "/api/segment/get/alpha"); got.status != 200 {
			t.Fatalf("GET alpha = %d %s", got.status, got.body)
		}
	}
	for range 5 {
		if got := s.get(t, "/api/segment/get/beta"); got.status != 200 {
			t.Fatalf("GET beta = %d %s", got.status, got.body)
		}
	}
	// "random-3/" is the tag random-3 (Spring's trailing-slash match): its
	// failure is counted like the others, under the same route label (chi's
	// RoutePattern drops the trailing slash).
	for _, tag := range []string{"nope", "random-1", "random-2", "random-3/"} {
		if got := s.get(t, "/api/segment/get/"+tag); got.status != 500 {
			t.Fatalf("GET %s = %d, want 500", tag, got.status)
		}
	}

	tags := tagsOf(t, s.reg)
	want := []string{"alpha", "beta"}
	for _, fam := range perTagFamilies {
		if got := tags[fam]; !slices.Equal(got, want) {
			t.Errorf("%s has biz_tag %q, want exactly %q", fam, got, want)
		}
	}
	for fam, got := range tags {
		for _, tag := range got {
			if tag != "alpha" && tag != "beta" {
				t.Errorf("%s has a series for biz_tag %q, which was never served", fam, tag)
			}
		}
	}

	tests := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"leaf_segment_ids_issued_total", []string{"biz_tag", "alpha"}, 30},
		{"leaf_segment_ids_issued_total", []string{"biz_tag", "beta"}, 5},
		{"leaf_segment_step_ids", []string{"biz_tag", "alpha"}, 100},
		{"leaf_segment_min_step_ids", []string{"biz_tag", "beta"}, 50},
		{"leaf_segment_current_idle_ids", []string{"biz_tag", "alpha"}, 70},
		{"leaf_segment_current_idle_ids", []string{"biz_tag", "beta"}, 45},
		{"leaf_segment_loads_total", []string{"biz_tag", "beta", "result", "ok"}, 1},
		{"leaf_segment_errors_total", []string{"biz_tag", "", "code", "-2"}, 4},
		{"leaf_http_requests_total", []string{"route", "/api/segment/get/{key}", "method", "GET", "code", "200"}, 35},
		{"leaf_http_requests_total", []string{"route", "/api/segment/get/{key}", "method", "GET", "code", "500"}, 4},
		{"leaf_segment_tags", nil, 3},
		{"leaf_segment_tags_served", nil, 2},
		{"leaf_segment_tags_with_series", nil, 3}, // at most 200 tags: all of them
		{"leaf_segment_all_ids_issued_total", nil, 35},
	}
	for _, tt := range tests {
		got, ok := value(t, s.reg, tt.name, tt.labels...)
		if !ok || got != tt.want {
			t.Errorf("%s%q = %v (found %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	// A lookup of a tag the store does not have is not a failed load: no
	// load series, under biz_tag="" or any other.
	text := s.get(t, "/metrics").body
	if v, _ := value(t, s.reg, "leaf_segment_all_loads_total", "result", "error"); v != 0 {
		t.Errorf(`leaf_segment_all_loads_total{result="error"} = %v after 4 unknown-tag lookups, want 0`, v)
	}
	for _, bad := range []string{`leaf_segment_loads_total{biz_tag=""`, `leaf_segment_load_duration_seconds_count{`, `leaf_segment_loads_total{biz_tag="alpha",result="error"`} {
		if strings.Contains(text, bad) {
			t.Errorf("/metrics after 4 unknown-tag lookups has %s: %s", bad, grepLines(text, "leaf_segment_load"))
		}
	}
	// alpha used 30% of its first segment: the next one is loaded (or on its way).
	waittest.For(t, 10*time.Second, "alpha's next segment", func() bool {
		v, _ := value(t, s.reg, "leaf_segment_next_ready", "biz_tag", "alpha")
		return v == 1
	})
	if v, _ := value(t, s.reg, "leaf_segment_buffered_ids", "biz_tag", "alpha"); v != 170 {
		t.Errorf("leaf_segment_buffered_ids{alpha} = %v, want 70 + 100", v)
	}
	if v, _ := value(t, s.reg, "leaf_segment_loads_total", "biz_tag", "alpha", "result", "ok"); v != 2 {
		t.Errorf("leaf_segment_loads_total{alpha,ok} = %v, want 2", v)
	}
	// One histogram over every tag, without biz_tag: alpha's two loads and beta's one.
	if v, _ := value(t, s.reg, "leaf_segment_load_duration_seconds"); v != 3 {
		t.Errorf("leaf_segment_load_duration_seconds count = %v, want 3", v)
	}
}

func TestMetricsHTTPLabels(t *testing.T) {
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{}, demo)
	do(t, "POST", s.srv.URL+"/api/segment/get/leaf-segment-test")
	do(t, "BREW", s.srv.URL+"/api/segment/get/leaf-segment-test")
	s.get(t, "/no/such/path")
	s.get(t, "/no/other/path")
	s.get(t, "/healthz")
	tests := []struct {
		labels []string
		want   float64
	}{
		{[]string{"route", "/api/segment/get/{key}", "method", "POST", "code", "200"}, 1},
		// A method the route refuses: 405, counted under the route.
		{[]string{"route", "/api/segment/get/{key}", "method", "OTHER", "code", "405"}, 1},
		{[]string{"route", "unmatched", "method", "GET", "code", "404"}, 2},
		{[]string{"route", "/healthz", "method", "GET", "code", "200"}, 1},
	}
	for _, tt := range tests {
		if got, ok := value(t, s.reg, "leaf_http_requests_total", tt.labels...); !ok || got != tt.want {
			t.Errorf("leaf_http_requests_total%q = %v (found %v), want %v", tt.labels, got, ok, tt.want)
		}
	}
	if n := testutil.CollectAndCount(s.reg, "leaf_http_request_duration_seconds"); n != 4 {
		t.Errorf("leaf_http_request_duration_seconds has %d series, want 4 (route × method)", n)
	}
}

// promtoolCheck runs `promtool check metrics` on an exposition. Without
// promtool the test is skipped, or fails under CI=true. In -short mode the
// test is skipped.
func promtoolCheck(t *testing.T, exposition string) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: needs promtool")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool not found: CI must install it (apt-get install -y prometheus): %v", err)
		}
		t.Skip("promtool not found; install it with `apt-get install -y --no-install-recommends prometheus`")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// TestMetricsPromtool runs `promtool check metrics` on /metrics of a server
// that has served two tags and refused an unknown one.
func TestMetricsPromtool(t *testing.T) {
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{},
		store.Row{BizTag: "alpha", MaxID: 1, Step: 100}, store.Row{BizTag: "beta", MaxID: 1, Step: 100})
	s.get(t, "/api/segment/get/alpha")
	s.get(t, "/api/segment/get/beta")
	s.get(t, "/api/segment/get/unknown")
	s.get(t, "/api/v1/segment/buffers")
	got := s.get(t, "/metrics")
	if got.status != 200 {
		t.Fatalf("GET /metrics = %d", got.status)
	}
	for _, want := range []string{`leaf_segment_ids_issued_total{biz_tag="alpha"} 1`, `leaf_segment_errors_total{biz_tag="",code="-2"} 1`,
		"go_goroutines", "process_cpu_seconds_total", "go_build_info"} {
		if !strings.Contains(got.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	promtoolCheck(t, got.body)
}

func TestSnowflakeMetrics(t *testing.T) {
	gen, src := newStaticSnowflake(t, 237)
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: gen, SnowflakeSource: src, Registerer: reg}))
	defer srv.Close()
	for range 5 {
		if got := do(t, "GET", srv.URL+"/api/snowflake/get/x"); got.status != 200 {
			t.Fatalf("GET /api/snowflake/get/x = %d %s", got.status, got.body)
		}
	}
	tests := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"leaf_snowflake_ids_issued_total", nil, 5},
		{"leaf_snowflake_worker_id", []string{"source", "static"}, 237},
		{"leaf_snowflake_clock_backward_events_total", nil, 0},
		{"leaf_snowflake_high_water_stores_total", []string{"result", "error"}, 0},
	}
	for _, tt := range tests {
		if got, ok := value(t, reg, tt.name, tt.labels...); !ok || got != tt.want {
			t.Errorf("%s%q = %v (found %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	if v, _ := value(t, reg, "leaf_snowflake_last_issued_timestamp_seconds"); time.Since(time.Unix(int64(v), 0)) > time.Minute {
		t.Errorf("leaf_snowflake_last_issued_timestamp_seconds = %v, want about now", v)
	}
	got := do(t, "GET", srv.URL+"/metrics")
	if strings.Contains(got.body, "leaf_segment_") {
		t.Errorf("/metrics with segment mode off has leaf_segment_ series")
	}
	promtoolCheck(t, got.body)
}

// TestNewHandlerRefusesSecondRegistration: two handlers on one registry is
// a wiring mistake and panics like MustRegister.
func TestNewHandlerRefusesSecondRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	api.NewHandler(api.Deps{Registerer: reg})
	defer func() {
		r := recover()
		err, _ := r.(error)
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			t.Errorf("second NewHandler on one registry: recovered %v, want AlreadyRegisteredError", r)
		}
	}()
	api.NewHandler(api.Deps{Registerer: reg})
}

// grepLines returns the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
