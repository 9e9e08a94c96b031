package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

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

// newServer starts the real handler over loopback on a fresh SQLite store
// holding the given rows. Its wait timeout is generous: a miss lookup on a
// loaded CI machine took over 500 ms, and no test here is about the timeout.
func newServer(t *testing.T, rows ...store.Row) (*httptest.Server, store.Store) {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, dbtest.SQLite(t), rows...)
	gen, err := segment.New(ctx, st, segment.Config{WaitTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { gen.Close() })
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st}))
	t.Cleanup(srv.Close)
	return srv, st
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

type leafBody struct {
	Timestamp int64  `json:"timestamp"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Exception string `json:"exception"`
	Message   string `json:"message"`
	Path      string `json:"path"`
}

var demo = store.Row{BizTag: "leaf-segment-test", MaxID: 1, Step: 2000, Description: "demo"}

func TestSegmentGetLeafFormat(t *testing.T) {
	srv, _ := newServer(t, demo, store.Row{BizTag: "a.b.c", MaxID: 100, Step: 10})
	tests := []struct {
		method, path string
		want         string
	}{
		{"GET", "/api/segment/get/leaf-segment-test", "1"},
		{"POST", "/api/segment/get/leaf-segment-test", "2"},
		{"PUT", "/api/segment/get/leaf-segment-test", "3"},
		{"DELETE", "/api/segment/get/leaf-segment-test", "4"},
		// Leaf's Spring would cut "a.b.c" to "a.b"; we take the key whole.
		{"GET", "/api/segment/get/a.b.c", "100"},
		{"GET", "/api/segment/get/a%2Eb%2Ec", "101"},
	}
	for _, tt := range tests {
		got := do(t, tt.method, srv.URL+tt.path)
		if got.status != 200 || got.body != tt.want {
			t.Errorf("%s %s = %d %q, want 200 %q", tt.method, tt.path, got.status, got.body, tt.want)
		}
		if got.ctype != "text/plain;charset=UTF-8" {
			t.Errorf("%s %s Content-Type = %q, want Leaf's text/plain;charset=UTF-8", tt.method, tt.path, got.ctype)
		}
	}
}

func TestSegmentGetUnknownTagIsLeafError(t *testing.T) {
	srv, _ := newServer(t, demo)
	start := time.Now()
	got := do(t, "GET", srv.URL+"/api/segment/get/no-such-tag")
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("unknown tag answered after %v, want under 1s", elapsed)
	}
	if got.status != 500 {
		t.Fatalf("status = %d, want 500", got.status)
	}
	var b leafBody
	if err := json.Unmarshal([]byte(got.body), &b); err != nil {
		t.Fatalf("body %q is not JSON: %v", got.body, err)
	}
	want := leafBody{Timestamp: b.Timestamp, Status: 500, Error: "Internal Server Error",
		Exception: "com.sankuai.inf.leaf.server.exception.LeafServerException",
		Message:   "Result{id=-2, status=EXCEPTION}", Path: "/api/segment/get/no-such-tag"}
	if b != want {
		t.Errorf("body = %+v, want %+v", b, want)
	}
	if now := time.Now().UnixMilli(); b.Timestamp < start.UnixMilli() || b.Timestamp > now {
		t.Errorf("timestamp = %d, want within [%d, %d]", b.Timestamp, start.UnixMilli(), now)
	}
	if strings.HasSuffix(got.body, "\n") {
		t.Errorf("body ends in a newline; Spring's Jackson writes none")
	}
	// Leaf's field order, so byte-comparing clients keep working.
	if !strings.HasPrefix(got.body, `{"timestamp":`) || !strings.Contains(got.body, `"status":500,"error":"Internal Server Error","exception":`) {
		t.Errorf("body = %s, want Leaf's field order", got.body)
	}
}

// blockedFind is a store whose FindTags (the miss lookup) waits for its
// context: a lookup round that hangs on the database.
type blockedFind struct{ store.Store }

func (b blockedFind) FindTags(ctx context.Context, _ []string) (map[string]bool, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestMissLookupQueueFullIsRetryable: a tag not in the cache that finds the
// next lookup round full (8,192 names waiting while a round hangs) was not
// looked up: Leaf's route answers -5 (its own code, not -3, which points at
// the database), the JSON API 429 miss_lookup_limited with Retry-After,
// never "not found".
func TestMissLookupQueueFullIsRetryable(t *testing.T) {
	ctx := context.Background()
	st, err := dsn.Open(ctx, dbtest.SQLite(t), true)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	gen, err := segment.New(ctx, blockedFind{st}, segment.Config{LoadTimeout: time.Hour})
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { gen.Close() })
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st}))
	t.Cleanup(srv.Close)

	// A cancelled context leaves its name in the round and returns at once:
	// the first round hangs, the next one fills.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	for i := 0; ; i++ {
		_, err := gen.Get(gone, fmt.Sprintf("queued-%d", i))
		if errors.Is(err, segment.ErrMissLimited) {
			break
		}
		if i > 3*8192 { // the first round takes what joins in its window, the next 8,192
			t.Fatalf("Get(queued-%d) = %v: the lookup queue never filled", i, err)
		}
	}
	if got := do(t, "GET", srv.URL+"/api/segment/get/new"); got.status != 500 || !strings.Contains(got.body, "Result{id=-5, status=EXCEPTION}") {
		t.Errorf("GET /api/segment/get/new = %d %s, want 500 id=-5", got.status, got.body)
	}
	resp, err := http.Get(srv.URL + "/api/v1/segment/new")
	if err != nil {
		t.Fatalf("GET /api/v1/segment/new: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"miss_lookup_limited"`) ||
		!strings.Contains(string(body), `"leafCode":-5`) || !strings.Contains(string(body), "names wait for the next lookup round") {
		t.Errorf("GET /api/v1/segment/new = %d Retry-After %q %s, want 429 miss_lookup_limited with Retry-After, leafCode -5 and the reason",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// TestEscapedKeysDecodedOnce: a key is percent-decoded exactly once, so the
// tag "%41" never draws from the tag "A" (a double decode did that).
func TestEscapedKeysDecodedOnce(t *testing.T) {
	srv, _ := newServer(t,
		store.Row{BizTag: "A", MaxID: 1, Step: 10},
		store.Row{BizTag: "%41", MaxID: 1000, Step: 10},
		store.Row{BizTag: "100%", MaxID: 2000, Step: 10},
		store.Row{BizTag: "a/b", MaxID: 3000, Step: 10},
		store.Row{BizTag: "日本", MaxID: 4000, Step: 10})
	tests := []struct{ path, want string }{
		{"/api/segment/get/%2541", "1000"},
		{"/api/segment/get/%2541", "1001"},
		{"/api/segment/get/100%25", "2000"},
		{"/api/segment/get/a%2Fb", "3000"},
		{"/api/segment/get/%E6%97%A5%E6%9C%AC", "4000"},
		{"/api/segment/get/A", "1"}, // untouched by the "%41" requests
		{"/api/v1/segment/%2541?count=1", `{"ids":["1002"]}`},
	}
	for _, tt := range tests {
		if got := do(t, "GET", srv.URL+tt.path); got.status != 200 || got.body != tt.want {
			t.Errorf("GET %s = %d %q, want 200 %q", tt.path, got.status, got.body, tt.want)
		}
	}
}

func TestBadKeys(t *testing.T) {
	srv, _ := newServer(t, demo)
	long := strings.Repeat("k", 129)
	tests := []struct {
		name, path string
		want       int
	}{
		{"empty", "/api/segment/get/", 404},
		{"too long", "/api/segment/get/" + long, 400},
		{"128 chars is a key", "/api/segment/get/" + long[:128], 500},
		{"128 runes is a key", "/api/segment/get/" + strings.Repeat("é", 128), 500},
		{"NUL", "/api/segment/get/a%00b", 400},
		{"newline", "/api/segment/get/a%0Ab", 400},
		{"invalid utf8", "/api/segment/get/a%ffb", 400},
		{"snowflake empty", "/api/snowflake/get/", 404},
		{"no route", "/api/nothing", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := do(t, "GET", srv.URL+tt.path)
			if got.status != tt.want {
				t.Errorf("GET %s = %d %s, want %d", tt.path, got.status, got.body, tt.want)
			}
			var b leafBody
			if err := json.Unmarshal([]byte(got.body), &b); err != nil || b.Status != tt.want || b.Message == "" {
				t.Errorf("GET %s body = %s (err %v), want JSON with status %d and a message", tt.path, got.body, err, tt.want)
			}
		})
	}
}

func TestDisabledModesAnswer503(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(api.Deps{}))
	defer srv.Close()
	for _, path := range []string{"/api/segment/get/x", "/api/snowflake/get/x"} {
		got := do(t, "GET", srv.URL+path)
		if got.status != 503 || !strings.Contains(got.body, "disabled") || !strings.Contains(got.ctype, "application/json") {
			t.Errorf("GET %s = %d %q %q, want 503 JSON saying the mode is disabled", path, got.status, got.ctype, got.body)
		}
	}
}

func TestHealthAndReady(t *testing.T) {
	srv, st := newServer(t, demo)
	if got := do(t, "GET", srv.URL+"/healthz"); got.status != 200 {
		t.Errorf("GET /healthz = %d, want 200", got.status)
	}
	if got := do(t, "GET", srv.URL+"/readyz"); got.status != 200 || !strings.Contains(got.body, `"ready":true`) {
		t.Errorf("GET /readyz = %d %s, want 200 ready", got.status, got.body)
	}
	st.Close() // the store goes away: not ready any more
	if got := do(t, "GET", srv.URL+"/readyz"); got.status != 503 {
		t.Errorf("GET /readyz after store closed = %d %s, want 503", got.status, got.body)
	}
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		give    string
		want    string
		wantErr error
	}{
		{"order", "order", nil},
		{"a.b", "a.b", nil},
		{"a/b", "a/b", nil},
		{"%41", "%41", nil}, // decoded once already: never again
		{"100%", "100%", nil},
		{"", "", api.ErrKeyEmpty},
		{"a\x00", "", api.ErrKeyInvalid},
		{"a\nb", "", api.ErrKeyInvalid},
		{"\xff", "", api.ErrKeyInvalid},
		{strings.Repeat("x", 129), "", api.ErrKeyTooLong},
		{strings.Repeat("ü", 128), strings.Repeat("ü", 128), nil},
	}
	for _, tt := range tests {
		got, err := api.ParseKey(tt.give)
		if got != tt.want || !errorsIs(err, tt.wantErr) {
			t.Errorf("ParseKey(%q) = %q, %v, want %q, %v", tt.give, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"order", "a.b", "%zz", "a\x00", strings.Repeat("x", 129), "ü", "%2F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		key, err := api.ParseKey(raw)
		if err != nil {
			return
		}
		if n := len([]rune(key)); n < 1 || n > api.MaxKeyLen {
			t.Errorf("ParseKey(%q) = %q with %d runes, want 1..%d", raw, key, n, api.MaxKeyLen)
		}
	})
}

// FuzzRouter sends arbitrary paths and methods through the real handler: it
// must never panic and always answer one of the documented statuses.
func FuzzRouter(f *testing.F) {
	ctx := context.Background()
	st, err := dsn.Open(ctx, "sqlite:"+f.TempDir()+"/leaf.db", true)
	if err != nil {
		f.Fatalf("open store: %v", err)
	}
	defer st.Close()
	if err := st.Create(ctx, demo); err != nil {
		f.Fatalf("Create: %v", err)
	}
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		f.Fatalf("segment.New: %v", err)
	}
	defer gen.Close()
	h := api.NewHandler(api.Deps{Segment: gen, Store: st})
	for _, s := range []string{"/api/segment/get/leaf-segment-test", "/api/segment/get/x.y", "/api/snowflake/get/a", "/", "/api/segment/get/%ff", "//api/segment/get/a/b"} {
		f.Add("GET", s)
	}
	f.Add("BREW", "/api/segment/get/leaf-segment-test")
	f.Fuzz(func(t *testing.T, method, path string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.Method = method
		req.URL.Path = path
		req.URL.RawPath = ""
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 404, 405, 500, 503:
		default:
			t.Errorf("%s %q = %d, want a documented status", method, path, rec.Code)
		}
		if rec.Code == 200 && strings.HasPrefix(path, "/api/segment/get/") && rec.Body.Len() == 0 {
			t.Errorf("%s %q = 200 with empty body", method, path)
		}
	})
}

func errorsIs(err, target error) bool {
	if target == nil {
		return err == nil
	}
	return errors.Is(err, target)
}
