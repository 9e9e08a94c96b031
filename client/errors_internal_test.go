package client

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestNewError(t *testing.T) {
	seg := route{path: "/api/segment/get/x"}
	segBatch := route{path: "/api/v1/segment/x?count=10", batch: true, count: 10}
	sf := route{path: "/api/snowflake/get/x", snowflake: true}
	sfBatch := route{path: "/api/v1/snowflake?count=10", batch: true, snowflake: true, count: 10}
	leaf := func(code string) string {
		return `{"timestamp":1,"status":500,"error":"Internal Server Error","exception":"com.sankuai.inf.leaf.server.exception.LeafServerException","message":"Result{id=` + code + `, status=EXCEPTION}","path":"/api/segment/get/x"}`
	}
	tests := []struct {
		name      string
		r         route
		status    int
		give      string
		want      error
		wantLeaf  int64
		wantCode  string
		wantRetry bool
	}{
		{"leaf unknown tag", seg, 500, leaf("-2"), ErrTagNotFound, -2, "", false},
		{"leaf not initialised", seg, 500, leaf("-1"), ErrNotInitialized, -1, "", true},
		{"leaf no segment ready", seg, 500, leaf("-3"), ErrNotReady, -3, "", true},
		{"leaf snowflake clock behind", sf, 500, leaf("-1"), ErrNotReady, -1, "", true},
		{"leaf snowflake clock back", sf, 500, leaf("-3"), ErrNotReady, -3, "", true},
		{"leaf snowflake high-water mark not stored", sf, 500, leaf("-4"), ErrNotReady, -4, "", true},
		{"leaf miss lookups spent", seg, 500, leaf("-5"), ErrNotReady, -5, "", true},
		{"batch miss lookups spent", segBatch, 429, `{"status":429,"code":"miss_lookup_limited","message":"m","path":"/x","leafCode":-5}`, ErrNotReady, -5, "miss_lookup_limited", true},
		{"leaf snowflake interrupted", sf, 500, leaf("-2"), nil, -2, "", true},
		{"leaf-go disabled", seg, 503, `{"timestamp":1,"status":503,"error":"segment mode is disabled","message":"start leaf-server with --segment","path":"/x"}`, ErrDisabled, 0, "", true},
		{"batch disabled", sfBatch, 503, `{"timestamp":1,"status":503,"error":"snowflake mode is disabled","message":"how","path":"/x"}`, ErrDisabled, 0, "", true},
		{"batch unknown tag", segBatch, 404, `{"status":404,"code":"tag_not_found","message":"segment: biz tag not found","path":"/x","leafCode":-2}`, ErrTagNotFound, -2, "tag_not_found", false},
		{"batch not ready", segBatch, 503, `{"status":503,"code":"not_ready","message":"m","path":"/x","leafCode":-3}`, ErrNotReady, -3, "not_ready", true},
		{"batch not initialised", segBatch, 503, `{"status":503,"code":"not_initialized","message":"m","path":"/x","leafCode":-1}`, ErrNotInitialized, -1, "not_initialized", true},
		{"batch snowflake behind", sfBatch, 503, `{"status":503,"code":"clock_behind","message":"m","path":"/x","leafCode":-3}`, ErrNotReady, -3, "clock_behind", true},
		{"batch bad count", segBatch, 400, `{"status":400,"code":"bad_count","message":"count must be …","path":"/x"}`, nil, 0, "bad_count", false},
		{"batch route missing (leaf-go)", segBatch, 404, `{"timestamp":1,"status":404,"error":"Not Found","message":"no route for GET /api/v1/segment/x","path":"/x"}`, ErrBatchUnsupported, 0, "", true},
		{"batch route missing (Java Leaf)", sfBatch, 404, `{"timestamp":1,"status":404,"error":"Not Found","message":"No message available","path":"/api/v1/snowflake"}`, ErrBatchUnsupported, 0, "", true},
		{"proxy html", seg, 502, `<html><body>Bad Gateway</body></html>`, nil, 0, "", true},
		{"proxy text with Leaf message", seg, 500, `Result{id=-2, status=EXCEPTION}`, ErrTagNotFound, -2, "", false},
		{"leaf bad key", seg, 400, `{"timestamp":1,"status":400,"error":"Bad Request","message":"api: key is empty","path":"/x"}`, nil, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newError(tt.r, "http://s", tt.status, []byte(tt.give))
			if tt.want != nil && !errors.Is(e, tt.want) {
				t.Errorf("newError(%s) = %v (kind %v), want it to match %v", tt.give, e, e.kind, tt.want)
			}
			if tt.want == nil && e.kind != nil {
				t.Errorf("newError(%s) matches %v, want no sentinel", tt.give, e.kind)
			}
			if e.LeafCode != tt.wantLeaf || e.Code != tt.wantCode || e.Status != tt.status || e.Server != "http://s" {
				t.Errorf("newError(%s) = %+v, want Leaf code %d, code %q, status %d", tt.give, e, tt.wantLeaf, tt.wantCode, tt.status)
			}
			if got := e.retryable(); got != tt.wantRetry {
				t.Errorf("newError(%s).retryable() = %v, want %v", tt.give, got, tt.wantRetry)
			}
		})
	}
}

func TestParseBatch(t *testing.T) {
	tests := []struct {
		give    string
		want    []int64
		wantErr error
	}{
		{give: `{"ids":["1","2","9223372036854775807"]}`, want: []int64{1, 2, 9223372036854775807}},
		{give: `{"ids":[1,2]}`, want: []int64{1, 2}},
		{give: `{"ids":["0"]}`, wantErr: ErrDisabled},
		{give: `{"ids":[]}`},
		{give: `{"ids":["1","2","3","4"]}`}, // more than asked for
		{give: `{"ids":["9223372036854775808"]}`},
		{give: `{"ids":["1.5"]}`},
		{give: `[]`},
		{give: `{"tags":[]}`},
	}
	for _, tt := range tests {
		got, err := parseBatch("http://s", []byte(tt.give), 3)
		if tt.want != nil {
			if err != nil || len(got) != len(tt.want) {
				t.Errorf("parseBatch(%s) = %v, %v, want %v", tt.give, got, err, tt.want)
				continue
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("parseBatch(%s) = %v, want %v", tt.give, got, tt.want)
				}
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || !e.retryable() {
			t.Errorf("parseBatch(%s) = %v, %v, want a retryable *Error", tt.give, got, err)
		}
		if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
			t.Errorf("parseBatch(%s) error = %v, want %v", tt.give, err, tt.wantErr)
		}
	}
}

func TestParseLeafCode(t *testing.T) {
	tests := []struct {
		give string
		want int64
	}{
		{"Result{id=-2, status=EXCEPTION}", -2},
		{"Result{id=-1,status=EXCEPTION}", -1},
		{"x Result{id=-3, status=EXCEPTION} y", -3},
		{"Result{id=5, status=SUCCESS}", 0},
		{"Result{id=5, status=EXCEPTION}", 0},
		{"Result{id=-99999999999999999999, status=EXCEPTION}", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := parseLeafCode(tt.give); got != tt.want {
			t.Errorf("parseLeafCode(%q) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

func FuzzParseLeafCode(f *testing.F) {
	f.Add("Result{id=-2, status=EXCEPTION}")
	f.Add("Result{id=-1,status=EXCEPTION}")
	f.Add(`{"message":"Result{id=-3, status=EXCEPTION}"}`)
	f.Fuzz(func(t *testing.T, s string) {
		if got := parseLeafCode(s); got > 0 {
			t.Fatalf("parseLeafCode(%q) = %d, want <= 0", s, got)
		}
		e := newError(route{}, "http://s", 500, []byte(s))
		_ = e.Error()
	})
}

func FuzzEscapeTag(f *testing.F) {
	for _, s := range []string{"a/b c.d", "100%", "%41", "日本", "x?y#z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		esc := escapeTag(tag)
		if strings.ContainsAny(esc, "/?#") {
			t.Fatalf("escapeTag(%q) = %q leaves a path or query delimiter", tag, esc)
		}
		if got, err := url.PathUnescape(esc); err != nil || got != tag {
			t.Fatalf("PathUnescape(escapeTag(%q)) = %q, %v", tag, got, err)
		}
	})
}
