package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/buildinfo"
)

// TestInfo checks GET /api/v1/info: the build it was given, the start time
// and uptime on the handler's clock, and the readiness reasons /readyz
// gives, before and after the store goes away.
func TestInfo(t *testing.T) {
	started := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	now := started.Add(90*time.Second + 400*time.Millisecond)
	build := buildinfo.Info{Version: "v1.2.3", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	srv := httptest.NewServer(api.NewHandler(api.Deps{Build: build, Started: started, Now: func() time.Time { return now }}))
	defer srv.Close()
	got := do(t, "GET", srv.URL+"/api/v1/info")
	if got.status != 200 {
		t.Fatalf("GET /api/v1/info = %d %s, want 200", got.status, got.body)
	}
	var body struct {
		Build         buildinfo.Info    `json:"build"`
		Started       string            `json:"started"`
		UptimeSeconds int64             `json:"uptimeSeconds"`
		Ready         bool              `json:"ready"`
		Checks        map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(got.body), &body); err != nil {
		t.Fatalf("GET /api/v1/info body %s: %v", got.body, err)
	}
	if body.Build != build {
		t.Errorf("build = %+v, want %+v", body.Build, build)
	}
	if body.Started != "2026-12-02T06:00:00Z" || body.UptimeSeconds != 90 {
		t.Errorf("started %q uptime %d s, want 2026-12-02T06:00:00Z and 90", body.Started, body.UptimeSeconds)
	}
	if !body.Ready || len(body.Checks) != 0 {
		t.Errorf("ready %v checks %v, want ready with no checks (no mode enabled)", body.Ready, body.Checks)
	}
}

// TestInfoReadinessReasons checks that /api/v1/info carries the reasons
// /readyz gives, and stays 200 when the server is not ready.
func TestInfoReadinessReasons(t *testing.T) {
	srv, st := newServer(t, demo)
	if got := do(t, "GET", srv.URL+"/api/v1/info"); got.status != 200 || !jsonHas(t, got.body, "ready", true) {
		t.Errorf("GET /api/v1/info = %d %s, want 200 ready", got.status, got.body)
	}
	st.Close()
	got := do(t, "GET", srv.URL+"/api/v1/info")
	var body struct {
		Ready  bool              `json:"ready"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(got.body), &body); err != nil || got.status != 200 {
		t.Fatalf("GET /api/v1/info after store closed = %d %s (%v), want 200 JSON", got.status, got.body, err)
	}
	if body.Ready || body.Checks["store"] == "" || body.Checks["store"] == "ok" {
		t.Errorf("after store closed: ready %v checks %v, want not ready with the store's reason", body.Ready, body.Checks)
	}
}

// jsonHas reports whether the JSON object body has key with value want.
func jsonHas(t *testing.T, body, key string, want any) bool {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	return m[key] == want
}
