package api_test

import (
	"context"
	"encoding/json"
	"io"
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
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st, AdminToken: token}))
	t.Cleanup(srv.Close)
	return srv
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
		if got := call(t, tt.method, srv.URL+tt.path, "anything", `{}`); got.status != 404 {
			t.Errorf("%s %s without a configured token = %d, want 404", tt.method, tt.path, got.status)
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
