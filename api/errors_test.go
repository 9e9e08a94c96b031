package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
)

// TestErrorAnswersExact pins the error answers of errors.go byte for byte:
// status, the headers a client reads, and the body.
func TestErrorAnswersExact(t *testing.T) {
	ctx := context.Background()
	now := func() time.Time { return time.UnixMilli(1_700_000_000_123) }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	st := openStore(t, dbtest.SQLite(t), demo)
	gen, err := segment.New(ctx, st, segment.Config{WaitTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { gen.Close() })
	live := api.NewHandler(api.Deps{Segment: gen, Store: st, AdminToken: "t", Now: now, Logger: quiet})

	closed := openStore(t, dbtest.SQLite(t))
	closed.Close()
	down := api.NewHandler(api.Deps{Store: closed, AdminToken: "t", Now: now, Logger: quiet})

	const adminJSON = "application/json;charset=UTF-8"
	tests := []struct {
		name       string
		h          http.Handler
		method     string
		path       string
		body       string
		wantStatus int
		wantHeader map[string]string
		wantBody   string
	}{
		{"Leaf route, unknown tag", live, "GET", "/api/segment/get/nope", "", 500,
			map[string]string{"Content-Type": adminJSON},
			`{"timestamp":1700000000123,"status":500,"error":"Internal Server Error","exception":"com.sankuai.inf.leaf.server.exception.LeafServerException","message":"Result{id=-2, status=EXCEPTION}","path":"/api/segment/get/nope"}`},
		{"batch, unknown tag", live, "GET", "/api/v1/segment/nope?count=2", "", 404,
			map[string]string{"Content-Type": adminJSON, "Retry-After": ""},
			`{"status":404,"code":"tag_not_found","message":"segment: biz tag not found: \"nope\"","path":"/api/v1/segment/nope","leafCode":-2}`},
		{"admin body over 64 KiB", live, "POST", "/api/v1/admin/tags", `{"bizTag":"` + strings.Repeat("x", 70<<10) + `"}`, 413,
			map[string]string{"Content-Type": adminJSON},
			`{"status":413,"code":"body_too_large","message":"request body over 64 KiB","path":"/api/v1/admin/tags"}`},
		{"admin update without fields", live, "PUT", "/api/v1/admin/tags/leaf-segment-test", `{}`, 400,
			map[string]string{"Content-Type": adminJSON},
			`{"status":400,"code":"bad_body","message":"give \"step\", \"description\" or both","path":"/api/v1/admin/tags/leaf-segment-test"}`},
		{"admin create of an existing tag", live, "POST", "/api/v1/admin/tags", `{"bizTag":"leaf-segment-test","step":10}`, 409,
			map[string]string{"Content-Type": adminJSON},
			`{"status":409,"code":"tag_exists","message":"create \"leaf-segment-test\": store: biz tag already exists","path":"/api/v1/admin/tags"}`},
		{"admin delete of an unknown tag", live, "DELETE", "/api/v1/admin/tags/nope", "", 404,
			map[string]string{"Content-Type": adminJSON},
			`{"status":404,"code":"tag_not_found","message":"delete \"nope\": store: biz tag not found","path":"/api/v1/admin/tags/nope"}`},
		{"admin list, store down", down, "GET", "/api/v1/admin/tags", "", 503,
			map[string]string{"Content-Type": adminJSON},
			`{"status":503,"code":"store_unavailable","message":"rows: sql: database is closed","path":"/api/v1/admin/tags"}`},
		{"Leaf /db page, store down", down, "GET", "/db", "", 503,
			map[string]string{"Content-Type": "text/html;charset=UTF-8", "Cache-Control": "no-store"},
			`<!DOCTYPE html>
<html><head><title>Leaf</title></head>
<body><p>Reading leaf_alloc failed; see the server log.</p></body></html>`},
		{"Leaf decode, bad ID", live, "GET", "/decodeSnowflakeId?snowflakeId=1.5", "", 200,
			map[string]string{"Content-Type": adminJSON},
			`{"errorMsg":"snowflake Id反解析发生异常!"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer t")
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || rec.Body.String() != tt.wantBody {
				t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
			for k, want := range tt.wantHeader {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s %s: header %s = %q, want %q", tt.method, tt.path, k, got, want)
				}
			}
		})
	}
}
