package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store/dsn"
)

func adminServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	srv, _ := adminServerLogs(t, token)
	return srv
}

// adminServerLogs is adminServer with the server's JSON log lines kept.
func adminServerLogs(t *testing.T, token string) (*httptest.Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	ctx := context.Background()
	st, err := dsn.Open(ctx, dbtest.SQLite(t), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st, AdminToken: token,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}))
	t.Cleanup(srv.Close)
	return srv, logs
}

func call(t *testing.T, method, url, token, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

func TestAdminAbsentWithoutToken(t *testing.T) {
	srv := adminServer(t, "")
	for _, tt := range []struct{ method, path string }{
		{"GET", "/api/v1/admin/tags"},
		{"POST", "/api/v1/admin/tags"},
		{"POST", "/api/v1/admin/tags/x/fence"},
	} {
		if got := call(t, tt.method, srv.URL+tt.path, "anything", `{}`); got.status != 404 || !strings.Contains(got.body, "admin API is off") {
			t.Errorf("%s %s without a configured token = %d %s, want 404 saying the admin API is off", tt.method, tt.path, got.status, got.body)
		}
	}
}

func TestAdminTokenChecked(t *testing.T) {
	srv := adminServer(t, "right-token")
	for _, tok := range []string{"", "wrong-token", "right-toke", "right-token-and-more"} {
		got := call(t, "POST", srv.URL+"/api/v1/admin/tags", tok, `{"bizTag":"x","step":10}`)
		if got.status != 401 {
			t.Errorf("POST /api/v1/admin/tags with token %q = %d, want 401", tok, got.status)
		}
	}
	// The refused create must not have happened.
	if got := call(t, "GET", srv.URL+"/api/segment/get/x", "", ""); got.status != 500 {
		t.Errorf("tag created despite 401: GET = %d %s", got.status, got.body)
	}
}

func TestAdminTagLifecycle(t *testing.T) {
	const tok = "s3cr3t"
	srv := adminServer(t, tok)
	steps := []struct {
		name, method, path, body string
		want                     int
	}{
		{"create", "POST", "/api/v1/admin/tags", `{"bizTag":"order.v2","maxId":"100","step":10,"description":"orders"}`, 201},
		{"duplicate", "POST", "/api/v1/admin/tags", `{"bizTag":"order.v2","step":10}`, 409},
		{"bad step", "POST", "/api/v1/admin/tags", `{"bizTag":"y","step":0}`, 400},
		{"bad json", "POST", "/api/v1/admin/tags", `{"bizTag":`, 400},
		{"unknown field", "POST", "/api/v1/admin/tags", `{"bizTag":"z","step":1,"ceiling":5}`, 400},
		{"long tag", "POST", "/api/v1/admin/tags", `{"bizTag":"` + strings.Repeat("t", 129) + `","step":1}`, 400},
		{"update", "PUT", "/api/v1/admin/tags/order.v2", `{"step":20,"description":"more"}`, 200},
		{"update step only keeps the description", "PATCH", "/api/v1/admin/tags/order.v2", `{"step":20}`, 200},
		{"update nothing", "PATCH", "/api/v1/admin/tags/order.v2", `{}`, 400},
		{"array body", "POST", "/api/v1/admin/tags", `[]`, 400},
		{"control character tag", "POST", "/api/v1/admin/tags", `{"bizTag":"a\u0001b","step":10}`, 400},
		{"max_id without room", "POST", "/api/v1/admin/tags", `{"bizTag":"end","maxId":"9223372036854775800","step":10}`, 400},
		{"fence without room", "POST", "/api/v1/admin/tags/order.v2/fence", `{"min":"9223372036854775807"}`, 400},
		{"update unknown", "PUT", "/api/v1/admin/tags/nope", `{"step":20}`, 404},
		{"fence", "POST", "/api/v1/admin/tags/order.v2/fence", `{"min":"1000000"}`, 200},
		{"fence bad", "POST", "/api/v1/admin/tags/order.v2/fence", `{"min":"-4"}`, 400},
		{"fence unknown", "POST", "/api/v1/admin/tags/nope/fence", `{"min":5}`, 404},
	}
	for _, st := range steps {
		got := call(t, st.method, srv.URL+st.path, tok, st.body)
		if got.status != st.want {
			t.Errorf("%s: %s %s = %d %s, want %d", st.name, st.method, st.path, got.status, got.body, st.want)
		}
		if got.status >= 400 && !strings.Contains(got.body, `"code"`) {
			t.Errorf("%s: error body %s has no code", st.name, got.body)
		}
	}
	// The fenced tag is served from at least the fence.
	got := call(t, "GET", srv.URL+"/api/segment/get/order.v2", "", "")
	if got.status != 200 || len(got.body) < 7 {
		t.Fatalf("GET fenced tag = %d %s, want 200 and an ID >= 1000000", got.status, got.body)
	}
	list := call(t, "GET", srv.URL+"/api/v1/admin/tags", tok, "")
	var l struct {
		Tags []struct {
			BizTag, MaxID string
			Step          int64
		}
	}
	if err := json.Unmarshal([]byte(list.body), &l); err != nil || len(l.Tags) != 1 || l.Tags[0].BizTag != "order.v2" || l.Tags[0].Step != 20 || !strings.Contains(list.body, `"description":"more"`) {
		t.Errorf("GET /api/v1/admin/tags = %s (%v), want the one updated tag", list.body, err)
	}
	if got := call(t, "DELETE", srv.URL+"/api/v1/admin/tags/order.v2", tok, ""); got.status != 204 {
		t.Errorf("DELETE = %d %s, want 204", got.status, got.body)
	}
	if got := call(t, "DELETE", srv.URL+"/api/v1/admin/tags/order.v2", tok, ""); got.status != 404 {
		t.Errorf("second DELETE = %d, want 404", got.status)
	}
}

// TestAdminCreateAfterMiss: a tag requested (and found missing) just before
// it is created through the admin API is served at once after the create,
// not answered -2 while the generator still remembers the miss.
func TestAdminCreateAfterMiss(t *testing.T) {
	const tok = "s3cr3t"
	srv := adminServer(t, tok)
	if got := call(t, "GET", srv.URL+"/api/segment/get/late", "", ""); got.status != 500 || !strings.Contains(got.body, "-2") {
		t.Fatalf("GET before the create = %d %s, want Leaf's -2", got.status, got.body)
	}
	if got := call(t, "POST", srv.URL+"/api/v1/admin/tags", tok, `{"bizTag":"late","step":10}`); got.status != 201 {
		t.Fatalf("create = %d %s, want 201", got.status, got.body)
	}
	if got := call(t, "GET", srv.URL+"/api/segment/get/late", "", ""); got.status != 200 || got.body != "1" {
		t.Errorf("GET right after the create = %d %s, want 200 and ID 1", got.status, got.body)
	}
}

// TestAdminBadBodiesInAPITerms: a malformed admin body is answered 400 in the
// API's terms (field names as sent, what they want), never with
// encoding/json's Go-typed messages; a body over the limit is 413; none of
// them changes a row.
func TestAdminBadBodiesInAPITerms(t *testing.T) {
	const tok = "s3cr3t"
	srv := adminServer(t, tok)
	tests := []struct {
		name, method, path, body string
		want                     int
		wantMsg                  string
	}{
		{"step as string", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":"10"}`, 400, `field step: want an integer`},
		{"step fraction", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1.5}`, 400, `field step: want an integer`},
		{"step past int64", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1e30}`, 400, `field step: want an integer`},
		{"tag as number", "POST", "/api/v1/admin/tags", `{"bizTag":5,"step":1}`, 400, `field bizTag: want a string`},
		{"maxId not digits", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1,"maxId":"abc"}`, 400, `field maxId: want an integer`},
		{"maxId bool", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1,"maxId":true}`, 400, `field maxId: want an integer`},
		{"unknown field", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1,"foo":1}`, 400, `unknown field \"foo\"`},
		{"cut short", "POST", "/api/v1/admin/tags", `{"bizTag":`, 400, `body is not JSON`},
		{"trailing data", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1} {}`, 400, `trailing data after the JSON object`},
		{"trailing junk", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1}xyz`, 400, `trailing data after the JSON object`},
		{"tag not UTF-8", "POST", "/api/v1/admin/tags", "{\"bizTag\":\"a\xff\",\"step\":10}", 400, `field bizTag: not valid UTF-8`},
		{"tag lone surrogate", "POST", "/api/v1/admin/tags", `{"bizTag":"a\udcff","step":10}`, 400, `field bizTag: not valid UTF-8`},
		{"description not UTF-8", "POST", "/api/v1/admin/tags", "{\"bizTag\":\"x\",\"step\":10,\"description\":\"d\xc3\"}", 400, `field description: not valid UTF-8`},
		{"update description not UTF-8", "PATCH", "/api/v1/admin/tags/x", "{\"description\":\"\xfe\"}", 400, `field description: not valid UTF-8`},
		{"name not UTF-8", "POST", "/api/v1/admin/tags", "{\"bizTag\":\"x\",\"step\":10,\"d\xff\":1}", 400, `field name is not valid UTF-8`},
		{"tag twice other case", "POST", "/api/v1/admin/tags", `{"bizTag":"a1","BIZTAG":"a2","step":10}`, 400, `field bizTag given twice`},
		{"tag twice same case", "POST", "/api/v1/admin/tags", `{"bizTag":"a1","bizTag":"a2","step":10}`, 400, `field bizTag given twice`},
		{"update step twice", "PATCH", "/api/v1/admin/tags/x", `{"step":10,"Step":20}`, 400, `field step given twice`},
		{"step past int64 named range", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":99999999999999999999}`, 400, `field step: want an integer in [1, 2147483647]`},
		{"negative step named range", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":-5}`, 400, `field step: want an integer in [1, 2147483647]`},
		{"step past MaxStep named range", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":2147483648}`, 400, `field step: want an integer in [1, 2147483647]`},
		{"zero step on update named range", "PATCH", "/api/v1/admin/tags/leaf-segment-test", `{"step":0}`, 400, `field step: want an integer in [1, 2147483647]`},
		{"maxId past int64 named range", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1,"maxId":"99999999999999999999"}`, 400, `maxId must be an integer in [1, 9223372034707292160]`},
		{"maxId object named range", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1,"maxId":{}}`, 400, `field maxId: want an integer in [1, 9223372034707292160]`},
		{"no bizTag", "POST", "/api/v1/admin/tags", `{"step":10}`, 400, `field bizTag is required`},
		{"empty bizTag", "POST", "/api/v1/admin/tags", `{"bizTag":"","step":10}`, 400, `field bizTag is required`},
		{"no step", "POST", "/api/v1/admin/tags", `{"bizTag":"x"}`, 400, `field step is required`},
		{"empty", "POST", "/api/v1/admin/tags", ``, 400, `body is empty`},
		{"array", "POST", "/api/v1/admin/tags", `[]`, 400, `not an object`},
		{"null", "POST", "/api/v1/admin/tags", `null`, 400, `not an object`},
		{"update step as string", "PATCH", "/api/v1/admin/tags/x", `{"step":"a"}`, 400, `field step: want an integer`},
		{"update description as number", "PUT", "/api/v1/admin/tags/x", `{"description":7}`, 400, `field description: want a string`},
		{"fence min object", "POST", "/api/v1/admin/tags/x/fence", `{"min":{}}`, 400, `field min: want an integer`},
		{"fence min past the fence range", "POST", "/api/v1/admin/tags/x/fence", `{"min":"9223372036854775807"}`, 400, `"code":"bad_min","message":"min must be an integer in [1, 9223372034707292160]`},
		{"maxId past the fence range", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1,"maxId":"9223372036854775807"}`, 400, `"code":"bad_max_id","message":"maxId must be an integer in [1, 9223372034707292160]`},
		{"too large", "POST", "/api/v1/admin/tags", `{"bizTag":"x","step":1,"description":"` + strings.Repeat("d", 64<<10) + `"}`, 413, `over 64 KiB`},
	}
	for _, tt := range tests {
		got := call(t, tt.method, srv.URL+tt.path, tok, tt.body)
		if got.status != tt.want || !strings.Contains(got.body, tt.wantMsg) {
			t.Errorf("%s: %s %s = %d %s, want %d with %s", tt.name, tt.method, tt.path, got.status, got.body, tt.want, tt.wantMsg)
		}
		for _, leak := range []string{"json:", "Go ", "unmarshal", "int64", "struct"} {
			if strings.Contains(got.body, leak) {
				t.Errorf("%s: body %s leaks %q", tt.name, got.body, leak)
			}
		}
	}
	if got := call(t, "GET", srv.URL+"/api/v1/admin/tags", tok, ""); got.status != 200 || got.body != `{"tags":[]}` {
		t.Errorf("tags after the refused bodies = %d %s, want none", got.status, got.body)
	}
	// Field names match ignoring case, as encoding/json matches them.
	if got := call(t, "POST", srv.URL+"/api/v1/admin/tags", tok, `{"BizTag":"ok","STEP":10}`); got.status != 201 {
		t.Errorf("create with other-case field names = %d %s, want 201", got.status, got.body)
	}
}

// TestAdminAuthFailuresLogged: every refused admin request leaves one warn
// line with the remote address, method, path and reason, and no token.
func TestAdminAuthFailuresLogged(t *testing.T) {
	const tok = "right-token-123"
	srv, logs := adminServerLogs(t, tok)
	tests := []struct {
		name, auth, wantReason string
	}{
		{"no header", "", "missing bearer token"},
		{"other scheme", "Basic c2VjcmV0LXVzZXI6cHc=", "missing bearer token"},
		{"lowercase scheme, wrong token", "bearer wrong-token-xyz", "wrong bearer token"},
		{"wrong", "Bearer wrong-token-xyz", "wrong bearer token"},
		{"prefix of the token", "Bearer right-token-12", "wrong bearer token"},
	}
	for _, tt := range tests {
		req, err := http.NewRequest("POST", srv.URL+"/api/v1/admin/tags", strings.NewReader(`{"bizTag":"x","step":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s: status %d, want 401", tt.name, resp.StatusCode)
		}
	}
	if got := call(t, "GET", srv.URL+"/api/v1/admin/tags", tok, ""); got.status != 200 {
		t.Fatalf("GET with the right token = %d %s", got.status, got.body)
	}

	var failures []map[string]any
	for _, l := range logs.lines(t) {
		if l["msg"] == "admin auth failed" {
			failures = append(failures, l)
		}
	}
	if len(failures) != len(tests) {
		t.Fatalf("%d auth failure lines, want %d (one per refusal, none for the right token): %v", len(failures), len(tests), failures)
	}
	for i, l := range failures {
		if l["level"] != "WARN" || l["reason"] != tests[i].wantReason || l["method"] != "POST" ||
			l["path"] != "/api/v1/admin/tags" || !strings.HasPrefix(l["remote"].(string), "127.0.0.1:") {
			t.Errorf("%s: line %v, want WARN with reason %q, method, path and remote", tests[i].name, l, tests[i].wantReason)
		}
	}
	logs.mu.Lock()
	all := logs.b.String()
	logs.mu.Unlock()
	for _, secret := range []string{"right-token-12", "wrong-token-xyz", "c2VjcmV0LXVzZXI6cHc="} {
		if strings.Contains(all, secret) {
			t.Errorf("the log holds the presented credential %q:\n%s", secret, all)
		}
	}
}

// TestAdminBearerSchemeAnyCase: the auth scheme is case-insensitive (RFC 7235
// §2.1), the token is not.
func TestAdminBearerSchemeAnyCase(t *testing.T) {
	const tok = "Right-Token-123"
	srv := adminServer(t, tok)
	tests := []struct {
		give string
		want int
	}{
		{"Bearer " + tok, 200},
		{"bearer " + tok, 200},
		{"BEARER " + tok, 200},
		{"bEaReR  " + tok, 200},
		{"bearer " + strings.ToLower(tok), 401},
		{"bearer", 401},
		{"Bearerx " + tok, 401},
	}
	for _, tt := range tests {
		req, err := http.NewRequest("GET", srv.URL+"/api/v1/admin/tags", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", tt.give)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET with Authorization %q = %d, want %d", tt.give, resp.StatusCode, tt.want)
		}
	}
}

// TestAdminJSONNotHTMLEscaped: API JSON is written as Jackson writes it,
// without encoding/json's HTML escapes (\u003c, \u003e, \u0026).
func TestAdminJSONNotHTMLEscaped(t *testing.T) {
	const tok = "s3cr3t"
	srv := adminServer(t, tok)
	got := call(t, "POST", srv.URL+"/api/v1/admin/tags", tok, `{"bizTag":"a<b>&c","step":10,"description":"x > 1 & y < 2"}`)
	want := `{"bizTag":"a<b>&c","maxId":"1","step":10,"description":"x > 1 & y < 2"}`
	if got.status != 201 || got.body != want {
		t.Errorf("create = %d %s, want 201 %s", got.status, got.body, want)
	}
	got = call(t, "GET", srv.URL+"/api/v1/nope&<x>", tok, "")
	if got.status != 404 || !strings.Contains(got.body, `"no route for GET /api/v1/nope&<x>"`) {
		t.Errorf("GET unknown path = %d %s, want 404 naming the path unescaped", got.status, got.body)
	}
}
