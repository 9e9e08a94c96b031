package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/store"
)

// wireAnswer is one recorded answer in testdata/leaf-wire/leaf-1.0.1.json:
// the status, the headers named, and the body: exactly (Body, after
// normalising), by regular expression (BodyMatch) or by its start
// (BodyPrefix, where the recording kept only that). Why, on a case's Ours,
// is the reason leaf-go deliberately answers otherwise (docs/compatibility.md).
type wireAnswer struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers"`
	Body       *string           `json:"body"`
	BodyMatch  string            `json:"bodyMatch"`
	BodyPrefix string            `json:"bodyPrefix"`
	Why        string            `json:"why"`
}

type wireCase struct {
	Name   string      `json:"name"`
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Accept string      `json:"accept"`
	Leaf   wireAnswer  `json:"leaf"`
	Ours   *wireAnswer `json:"ours"`
}

var (
	jsonTimestamp = regexp.MustCompile(`"timestamp":\d+`)
	// javaDate is Java's Date.toString, as the Whitelabel page prints it.
	javaDate = regexp.MustCompile(`<div id='created'>(?:Sun|Mon|Tue|Wed|Thu|Fri|Sat) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d\d \d\d:\d\d:\d\d [A-Z]+ \d{4}</div>`)
)

// normaliseWire replaces what changes between runs: the JSON error
// timestamp and the Whitelabel page's date.
func normaliseWire(body string) string {
	body = jsonTimestamp.ReplaceAllString(body, `"timestamp":0`)
	return javaDate.ReplaceAllString(body, "<div id='created'>CREATED</div>")
}

// useUTC makes the server's time zone UTC for the test, as the recording's
// was (/decodeSnowflakeId formats in the local zone, as Leaf's
// SimpleDateFormat does).
func useUTC(t *testing.T) {
	old := time.Local
	time.Local = time.UTC
	t.Cleanup(func() { time.Local = old })
}

// TestLeafWire replays every request of the Leaf 1.0.1 recording
// (testdata/leaf-wire/leaf-1.0.1.json, recorded from Leaf 1.0.1's own
// server) against leaf-server's handler over
// loopback, configured as the recorded Leaf was (segment mode on a database
// holding leaf-segment-test, snowflake off), and wants Leaf's answer, or the
// deliberate difference the case names with its reason.
func TestLeafWire(t *testing.T) {
	useUTC(t)
	raw, err := os.ReadFile("testdata/leaf-wire/leaf-1.0.1.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Cases []wireCase }
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("leaf-1.0.1.json: %v", err)
	}
	if len(file.Cases) < 51 {
		t.Fatalf("leaf-1.0.1.json has %d cases, want the recording's 51 and more", len(file.Cases))
	}
	srv, _ := newServer(t, demo)
	for _, c := range file.Cases {
		want := c.Leaf
		if c.Ours != nil {
			want = *c.Ours
			if want.Why == "" {
				t.Errorf("%s: a difference from Leaf without a reason", c.Name)
			}
		}
		req, err := http.NewRequest(c.Method, srv.URL+c.Path, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if c.Accept != "" {
			req.Header.Set("Accept", c.Accept)
		} else {
			req.Header.Set("Accept", "*/*") // as the recording's client sent
		}
		got := sendRequest(t, req)
		if got.status != want.Status {
			t.Errorf("%s: %s %s = %d %s, want %d", c.Name, c.Method, c.Path, got.status, got.body, want.Status)
			continue
		}
		for k, v := range want.Headers {
			if g := got.header.Get(k); g != v {
				t.Errorf("%s: %s %s header %s = %q, want %q", c.Name, c.Method, c.Path, k, g, v)
			}
		}
		body := normaliseWire(got.body)
		switch {
		case want.Body != nil && body != *want.Body:
			t.Errorf("%s: %s %s body =\n%s\nwant\n%s", c.Name, c.Method, c.Path, body, *want.Body)
		case want.BodyMatch != "" && !regexp.MustCompile(want.BodyMatch).MatchString(body):
			t.Errorf("%s: %s %s body = %s, want a match of %s", c.Name, c.Method, c.Path, body, want.BodyMatch)
		case want.BodyPrefix != "" && !strings.HasPrefix(body, want.BodyPrefix):
			t.Errorf("%s: %s %s body =\n%s\nwant it to start with\n%s", c.Name, c.Method, c.Path, body, want.BodyPrefix)
		}
	}
}

// TestLeafPagesExact: /cache and /db are byte for byte what Leaf's
// FreeMarker templates render for the same data (testdata/leaf-wire
// cache.html and db.html, rendered from Leaf's segment.ftl and db.ftl):
// digit grouping, Timestamp.toString update times, HTML-escaped tags, and
// /cache's rows in the order of Java's HashMap.
func TestLeafPagesExact(t *testing.T) {
	const odd = `<b>"x"&'y'</b>`
	srv, _ := newServer(t,
		store.Row{BizTag: "leaf-segment-test", MaxID: 1, Step: 2000},
		store.Row{BizTag: odd, MaxID: 7, Step: 3},
		store.Row{BizTag: "order", MaxID: 1234567, Step: 1000})
	if got := do(t, "GET", srv.URL+"/api/segment/get/leaf-segment-test"); got.status != 200 || got.body != "1" {
		t.Fatalf("GET leaf-segment-test = %d %q, want ID 1", got.status, got.body)
	}
	updateTime := regexp.MustCompile(`<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+</td>`)
	for _, tt := range []struct{ method, path, file string }{
		{"GET", "/cache", "cache.html"},
		{"POST", "/cache", "cache.html"},
		{"GET", "/db", "db.html"},
		{"POST", "/db", "db.html"},
	} {
		want, err := os.ReadFile("testdata/leaf-wire/" + tt.file)
		if err != nil {
			t.Fatal(err)
		}
		got := do(t, tt.method, srv.URL+tt.path)
		body := got.body
		if tt.path == "/db" {
			if n := len(updateTime.FindAllString(body, -1)); n != 3 {
				t.Errorf("%s /db has %d update times like 2026-12-01 13:18:24.0, want 3:\n%s", tt.method, n, body)
			}
			body = updateTime.ReplaceAllString(body, "<td>UPDATE_TIME</td>")
		}
		if got.status != 200 || got.ctype != "text/html;charset=UTF-8" || body != string(want) {
			t.Errorf("%s %s = %d %q\n%s\nwant 200 text/html;charset=UTF-8\n%s", tt.method, tt.path, got.status, got.ctype, body, want)
		}
		if strings.Contains(got.body, odd) {
			t.Errorf("%s %s shows the tag %s unescaped", tt.method, tt.path, odd)
		}
	}
	if got := send(t, "HEAD", srv.URL+"/cache", ""); got.status != 200 || got.body != "" {
		t.Errorf("HEAD /cache = %d %q, want 200 and no body", got.status, got.body)
	}
}

// sendRequest sends req over loopback and returns the status, headers and
// body.
func sendRequest(t *testing.T, req *http.Request) fullAnswer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return fullAnswer{resp.StatusCode, resp.Header, string(b)}
}

// TestRefusedMethodsKeepTheirRoute: a 405 is counted on /metrics under the
// route that refused the method, not as "unmatched"; HEAD / is the
// dashboard's GET without a body.
func TestRefusedMethodsKeepTheirRoute(t *testing.T) {
	srv := fullServer(t, demo)
	for _, tt := range []struct{ method, path string }{
		{"PUT", "/cache"}, {"DELETE", "/db"}, {"POST", "/healthz"}, {"POST", "/api/v1/segment/buffers"},
		{"BREW", "/api/segment/get/leaf-segment-test"}, {"TRACE", "/decodeSnowflakeId"},
	} {
		if got := send(t, tt.method, srv.URL+tt.path, ""); got.status != 405 {
			t.Fatalf("%s %s = %d, want 405", tt.method, tt.path, got.status)
		}
	}
	metrics := send(t, "GET", srv.URL+"/metrics", "").body
	for _, want := range []string{
		`leaf_http_requests_total{code="405",method="PUT",route="/cache"} 1`,
		`leaf_http_requests_total{code="405",method="DELETE",route="/db"} 1`,
		`leaf_http_requests_total{code="405",method="POST",route="/healthz"} 1`,
		`leaf_http_requests_total{code="405",method="POST",route="/api/v1/segment/buffers"} 1`,
		`leaf_http_requests_total{code="405",method="OTHER",route="/api/segment/get/{key}"} 1`,
		`leaf_http_requests_total{code="405",method="OTHER",route="/decodeSnowflakeId"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `code="405",method="PUT",route="unmatched"`) {
		t.Errorf("/metrics labels a 405 unmatched")
	}
	if got := send(t, "HEAD", srv.URL+"/", ""); got.status != 200 || got.body != "" ||
		!strings.HasPrefix(got.header.Get("Content-Type"), "text/html") {
		t.Errorf("HEAD / = %d %q %q, want 200 HTML without a body", got.status, got.header.Get("Content-Type"), got.body)
	}
}

// TestLeafPathForms: what Tomcat and Spring do to a path before matching
// it, beyond the recording: path parameters dropped in every segment, runs
// of slashes collapsed, escaped ";" and "/" kept in the key, the raw path in
// error bodies; the JSON API is left as sent.
func TestLeafPathForms(t *testing.T) {
	srv, _ := newServer(t, demo, store.Row{BizTag: "a;b", MaxID: 1, Step: 10}, store.Row{BizTag: "a/b", MaxID: 1, Step: 10},
		store.Row{BizTag: "50% b", MaxID: 1, Step: 10})
	for _, tt := range []struct {
		path       string
		wantStatus int
		wantBody   string // a regular expression, after normaliseWire
	}{
		{"/api/segment/get/leaf-segment-test;a=1;b=2", 200, `^1$`},
		{"/api/segment/get/leaf-segment-test;jsessionid=1/", 200, `^2$`},
		{"/api;x=1/segment;y/get/leaf-segment-test", 200, `^3$`},
		{"/api/segment/get//leaf-segment-test", 200, `^4$`},
		{"/api/segment/get/a%3Bb", 200, `^1$`},
		{"/api/segment/get/a%2Fb", 200, `^1$`},
		{"/api/segment/get/50%25%20b;x=1", 200, `^1$`},
		{"/api/segment/get/50%25%20b", 200, `^2$`},
		{"/api/segment/get/;x", 404, `^\{"timestamp":0,"status":404,"error":"Not Found","message":"No message available","path":"/api/segment/get/;x"\}$`},
		{"/api/segment/get/no%2Dsuch;x=1", 500, `"message":"Result\{id=-2, status=EXCEPTION\}","path":"/api/segment/get/no%2Dsuch;x=1"\}$`},
		{"/api/v1/segment/leaf-segment-test;x?count=1", 404, `"code":"tag_not_found"`},
		{"/api/v1//segment/leaf-segment-test?count=1", 404, `"code":"not_found"`},
	} {
		got := do(t, "GET", srv.URL+tt.path)
		if got.status != tt.wantStatus || !regexp.MustCompile(tt.wantBody).MatchString(normaliseWire(got.body)) {
			t.Errorf("GET %s = %d %s, want %d and %s", tt.path, got.status, got.body, tt.wantStatus, tt.wantBody)
		}
	}
}

// TestLeafAnswersHaveLength: pages and JSON bodies go with a Content-Length
// even past net/http's chunking threshold, where Tomcat chunks (a
// deliberate difference, docs/compatibility.md).
func TestLeafAnswersHaveLength(t *testing.T) {
	var rows []store.Row
	for i := range 30 {
		rows = append(rows, store.Row{BizTag: "tag-with-a-longer-name-" + strconv.Itoa(i), MaxID: 1, Step: 1000})
	}
	srv, _ := newServer(t, rows...)
	for _, path := range []string{"/cache", "/db"} {
		got := send(t, "GET", srv.URL+path, "")
		if got.status != 200 || len(got.body) < 3000 || got.header.Get("Content-Length") != strconv.Itoa(len(got.body)) {
			t.Errorf("GET %s = %d, %d bytes, Content-Length %q; want 200, over 3,000 bytes (net/http chunks past 2,048), and its length",
				path, got.status, len(got.body), got.header.Get("Content-Length"))
		}
	}
}

// TestV1DecodeUnescapes: the JSON API's decode reads the ID once unescaped,
// so an escaped ID is the same ID and "+5" is 5 however it is written.
func TestV1DecodeUnescapes(t *testing.T) {
	srv := newSnowflakeServer(t, 1)
	want := do(t, "GET", srv.URL+"/api/v1/snowflake/decode/5")
	if want.status != 200 {
		t.Fatalf("decode/5 = %d %s, want 200", want.status, want.body)
	}
	for _, path := range []string{"/api/v1/snowflake/decode/%35", "/api/v1/snowflake/decode/+5", "/api/v1/snowflake/decode/%2B5"} {
		if got := do(t, "GET", srv.URL+path); got.status != 200 || got.body != want.body {
			t.Errorf("GET %s = %d %s, want %s", path, got.status, got.body, want.body)
		}
	}
	for _, path := range []string{"/api/v1/snowflake/decode/%2D5", "/api/v1/snowflake/decode/5%20"} {
		if got := do(t, "GET", srv.URL+path); got.status != 400 || !strings.Contains(got.body, `"code":"bad_id"`) {
			t.Errorf("GET %s = %d %s, want 400 bad_id", path, got.status, got.body)
		}
	}
}

// BenchmarkNegotiationOverhead: leaf-go's ID route in-process (no metrics)
// with the Accept header RestTemplate and Feign send, which is parsed and
// negotiated as Spring does, against the same route with no Accept header
// (the unparsed path), alternating batches; ratio = with ÷ without.
func BenchmarkNegotiationOverhead(b *testing.B) {
	bare, _ := benchHandlers(b)
	call := func(accept string) func() {
		req := httptest.NewRequest("GET", "/api/segment/get/bench", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		w := &discard{h: http.Header{}}
		return func() { bare.ServeHTTP(w, req) }
	}
	overhead(b, 2000, call(""), call("application/json, application/*+json"), "no-accept", "resttemplate")
}
