package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log lines written so far, decoded.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// warns returns the JSON log lines at level WARN written so far.
func (s *syncBuffer) warns(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range s.lines(t) {
		if l["level"] == "WARN" {
			out = append(out, l)
		}
	}
	return out
}

// TestFailureLogsCarryRequestID: the Leaf single-ID routes skip chi's
// RequestID middleware, yet the failures they log carry a request ID: the
// caller's X-Request-Id when sent, else one of chi's form; the JSON API's
// failures carry the middleware's.
func TestFailureLogsCarryRequestID(t *testing.T) {
	clock := clocktest.New(time.UnixMilli(1_700_000_000_000))
	gen, err := snowflake.New(t.Context(), snowflake.Settings{WorkerID: 3, Clock: clock})
	if err != nil {
		t.Fatalf("snowflake.New: %v", err)
	}
	var logs syncBuffer
	// The handler's clock moves a second per request below: clock-behind
	// refusals are logged at most once a second.
	handlerClock := clocktest.New(time.UnixMilli(1_700_000_000_000))
	srv := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: gen, Now: handlerClock.Now,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}))
	defer srv.Close()
	if got := do(t, "GET", srv.URL+"/api/snowflake/get/x"); got.status != 200 {
		t.Fatalf("GET /api/snowflake/get/x = %d %s, want 200", got.status, got.body)
	}
	clock.Add(-time.Second) // every later request fails: -3 on Leaf's route, 503 on the JSON API

	tests := []struct {
		name, path, header string
		wantMsg            string
		wantID             string // "" means any ID of chi's form "host/random-000001"
	}{
		{name: "Leaf route, caller's ID", path: "/api/snowflake/get/x", header: "trace-42", wantMsg: "id request failed", wantID: "trace-42"},
		{name: "Leaf route, made on failure", path: "/api/snowflake/get/x", wantMsg: "id request failed"},
		{name: "JSON API, caller's ID", path: "/api/v1/snowflake?count=2", header: "trace-43", wantMsg: "batch request failed", wantID: "trace-43"},
		{name: "JSON API, from the middleware", path: "/api/v1/snowflake?count=2", wantMsg: "batch request failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handlerClock.Add(time.Second)
			before := len(logs.lines(t))
			req, err := http.NewRequest("GET", srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.header != "" {
				req.Header.Set("X-Request-Id", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", tt.path, err)
			}
			resp.Body.Close()
			if resp.StatusCode < 500 {
				t.Fatalf("GET %s = %d, want a 5xx failure", tt.path, resp.StatusCode)
			}
			lines := logs.lines(t)[before:]
			if len(lines) != 1 {
				t.Fatalf("GET %s logged %d lines, want 1: %v", tt.path, len(lines), lines)
			}
			l := lines[0]
			if l["msg"] != tt.wantMsg {
				t.Errorf("log msg = %v, want %q", l["msg"], tt.wantMsg)
			}
			id, _ := l["request_id"].(string)
			switch {
			case tt.wantID != "" && id != tt.wantID:
				t.Errorf("log request_id = %q, want %q", id, tt.wantID)
			case tt.wantID == "" && (!strings.Contains(id, "/") || !strings.Contains(id, "-")):
				t.Errorf("log request_id = %q, want chi's host/random-counter form", id)
			}
		})
	}
}
