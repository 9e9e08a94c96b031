package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/store"
)

const adminToken = "s3cr3t"

// fullServer starts the real handler over loopback with every route on:
// segment (the given rows), snowflake, metrics and the admin API.
func fullServer(t *testing.T, rows ...store.Row) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, dbtest.SQLite(t), rows...)
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { gen.Close() })
	sf, err := snowflake.New(ctx, snowflake.Settings{WorkerID: 1})
	if err != nil {
		t.Fatalf("snowflake.New: %v", err)
	}
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st, Snowflake: sf,
		AdminToken: adminToken, Registerer: prometheus.NewRegistry()}))
	t.Cleanup(srv.Close)
	return srv
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

// TestMethodNotAllowedListsAllow: every 405 carries the Allow header RFC 9110
// §15.5.6 requires, naming the methods the route serves, and the API's error
// body; a method chi does not know on a path that serves nothing is a 404.
func TestMethodNotAllowedListsAllow(t *testing.T) {
	srv := fullServer(t, demo)
	const leafAllow = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
	const pageAllow = "GET, HEAD, POST, OPTIONS"
	tests := []struct {
		method, path string
		want         int
		wantAllow    string
		wantCode     string // substring of the body
	}{
		{"POST", "/healthz", 405, "GET, HEAD", `"status":405`},
		{"DELETE", "/readyz", 405, "GET, HEAD", `"status":405`},
		{"POST", "/metrics", 405, "GET", `"status":405`},
		{"POST", "/", 405, "GET, HEAD", `"status":405`},
		{"PUT", "/dashboard/app.js", 405, "GET", `"status":405`},
		{"PUT", "/cache", 405, pageAllow, `"status":405`},
		{"DELETE", "/db", 405, pageAllow, `"status":405`},
		{"TRACE", "/decodeSnowflakeId", 405, leafAllow, `"status":405`},
		{"POST", "/api/v1/segment/leaf-segment-test?count=2", 405, "GET", `"code":"method_not_allowed"`},
		{"DELETE", "/api/v1/snowflake", 405, "GET", `"code":"method_not_allowed"`},
		{"POST", "/api/v1/snowflake/decode/1", 405, "GET", `"code":"method_not_allowed"`},
		{"POST", "/api/v1/segment/buffers", 405, "GET", `"code":"method_not_allowed"`},
		{"GET", "/api/v1/admin/tags/x", 405, "PUT, PATCH, DELETE", `"code":"method_not_allowed"`},
		{"GET", "/api/v1/admin/tags/x/fence", 405, "POST", `"code":"method_not_allowed"`},
		{"TRACE", "/api/segment/get/leaf-segment-test", 405, leafAllow, `"status":405`},
		{"TRACE", "/api/snowflake/get/x/", 405, leafAllow, `"status":405`},
		{"BREW", "/healthz", 405, "GET, HEAD", `"status":405`},
		{"BREW", "/api/segment/get/leaf-segment-test", 405, leafAllow, `"status":405`},
		{"BREW", "/no/such/path", 404, "", `"status":404`},
		{"BREW", "/api/v1/nothing", 404, "", `"code":"not_found"`},
	}
	for _, tt := range tests {
		got := send(t, tt.method, srv.URL+tt.path, adminToken)
		if got.status != tt.want || got.header.Get("Allow") != tt.wantAllow || !strings.Contains(got.body, tt.wantCode) {
			t.Errorf("%s %s = %d Allow %q %s, want %d Allow %q and %s",
				tt.method, tt.path, got.status, got.header.Get("Allow"), got.body, tt.want, tt.wantAllow, tt.wantCode)
		}
	}
	// Neither TRACE nor BREW took an ID.
	if got := send(t, "GET", srv.URL+"/api/segment/get/leaf-segment-test", ""); got.status != 200 || got.body != "1" {
		t.Errorf("GET after the refused methods = %d %q, want 200 and ID 1", got.status, got.body)
	}
}

// TestLeafOptionsTakesNoID: OPTIONS on Leaf's ID routes is answered as
// Spring 4.3's DispatcherServlet does for a @RequestMapping without methods
// (200, Allow, no body, no handler call); HEAD runs the handler and takes an
// ID, as in Leaf.
func TestLeafOptionsTakesNoID(t *testing.T) {
	srv := fullServer(t, demo)
	const leafAllow = "GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS" // Spring's, no spaces
	for _, path := range []string{"/api/segment/get/leaf-segment-test", "/api/segment/get/leaf-segment-test/",
		"/api/snowflake/get/x", "/api/segment/get/no-such-tag"} {
		got := send(t, "OPTIONS", srv.URL+path, "")
		if got.status != 200 || got.header.Get("Allow") != leafAllow || got.body != "" {
			t.Errorf("OPTIONS %s = %d Allow %q body %q, want 200 Allow %q and no body",
				path, got.status, got.header.Get("Allow"), got.body, leafAllow)
		}
	}
	if got := send(t, "GET", srv.URL+"/api/segment/get/leaf-segment-test", ""); got.status != 200 || got.body != "1" {
		t.Fatalf("GET after OPTIONS = %d %q, want ID 1 (OPTIONS took none)", got.status, got.body)
	}
	if got := send(t, "HEAD", srv.URL+"/api/segment/get/leaf-segment-test", ""); got.status != 200 || got.body != "" {
		t.Errorf("HEAD = %d %q, want 200 and no body", got.status, got.body)
	}
	if got := send(t, "GET", srv.URL+"/api/segment/get/leaf-segment-test", ""); got.body != "3" {
		t.Errorf("GET after HEAD = %q, want ID 3 (HEAD took 2, as Leaf's does)", got.body)
	}
}

// TestProbesAnswerHead: load balancers probe /healthz and /readyz with HEAD;
// they get GET's status and no body.
func TestProbesAnswerHead(t *testing.T) {
	srv, st := newServer(t, demo)
	for _, path := range []string{"/healthz", "/readyz"} {
		if got := send(t, "HEAD", srv.URL+path, ""); got.status != 200 || got.body != "" {
			t.Errorf("HEAD %s = %d %q, want 200 and no body", path, got.status, got.body)
		}
	}
	st.Close() // not ready any more
	if got := send(t, "HEAD", srv.URL+"/readyz", ""); got.status != 503 || got.body != "" {
		t.Errorf("HEAD /readyz after store closed = %d %q, want 503 and no body", got.status, got.body)
	}
}

// TestTrailingSlashIsTheKey: Leaf's Spring 4.3 matches a trailing slash by
// default, so /get/{key}/ draws from the tag {key}: the same counter, no
// second tag.
func TestTrailingSlashIsTheKey(t *testing.T) {
	srv := fullServer(t, demo)
	tests := []struct{ path, want string }{
		{"/api/segment/get/leaf-segment-test", "1"},
		{"/api/segment/get/leaf-segment-test/", "2"},
		{"/api/segment/get/leaf-segment-test", "3"},
	}
	for _, tt := range tests {
		if got := send(t, "GET", srv.URL+tt.path, ""); got.status != 200 || got.body != tt.want {
			t.Errorf("GET %s = %d %q, want 200 %q", tt.path, got.status, got.body, tt.want)
		}
	}
	if got := send(t, "GET", srv.URL+"/api/snowflake/get/x/", ""); got.status != 200 || len(got.body) < 10 {
		t.Errorf("GET /api/snowflake/get/x/ = %d %q, want 200 and an ID", got.status, got.body)
	}
	buffers := send(t, "GET", srv.URL+"/api/v1/segment/buffers", "")
	if strings.Contains(buffers.body, `leaf-segment-test/`) {
		t.Errorf("buffers = %s, want no tag with a trailing slash", buffers.body)
	}
	// Slashes Tomcat collapses are one slash.
	if got := send(t, "GET", srv.URL+"/api/segment/get/leaf-segment-test//", ""); got.status != 200 || got.body != "4" {
		t.Errorf("GET …/leaf-segment-test// = %d %q, want 200 and ID 4 (Tomcat collapses //)", got.status, got.body)
	}
	// Other unknown paths are a 404: Spring's body outside the JSON API,
	// the API's own (naming the route) inside.
	for _, tt := range []struct{ path, want string }{
		{"/api/segment/get/a/b", `"message":"No message available"`},
		{"/api/segment", `"message":"No message available"`},
		{"/api/v1", `"code":"not_found","message":"no route for GET /api/v1"`},
		{"/api/v1/segment", `"code":"not_found","message":"no route for GET /api/v1/segment"`},
	} {
		if got := send(t, "GET", srv.URL+tt.path, ""); got.status != 404 || !strings.Contains(got.body, tt.want) {
			t.Errorf("GET %s = %d %s, want 404 with %s", tt.path, got.status, got.body, tt.want)
		}
	}
	if got := send(t, "GET", srv.URL+"/api/segment/get/leaf-segment-test", ""); got.body != "5" {
		t.Errorf("GET after the 404s = %q, want ID 5", got.body)
	}
}
