package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

type segJSON struct {
	Current bool    `json:"current"`
	Value   string  `json:"value"`
	Max     string  `json:"max"`
	Step    int64   `json:"step"`
	Idle    string  `json:"idle"`
	Used    float64 `json:"used"`
}

type bufferJSON struct {
	BizTag                 string     `json:"bizTag"`
	InitOK                 bool       `json:"initOk"`
	NextReady              bool       `json:"nextReady"`
	Pos                    int        `json:"pos"`
	Segments               [2]segJSON `json:"segments"`
	Step                   int64      `json:"step"`
	MinStep                int64      `json:"minStep"`
	LastLoad               *time.Time `json:"lastLoad"`
	LastLoadLatencySeconds float64    `json:"lastLoadLatencySeconds"`
	Issued                 string     `json:"issued"`
	Remaining              string     `json:"remaining"`
	Rate                   float64    `json:"rate"`
	RunwaySeconds          *float64   `json:"runwaySeconds"`
	StepHistory            []struct {
		Time time.Time `json:"time"`
		Step int64     `json:"step"`
	} `json:"stepHistory"`
}

type buffersJSON struct {
	Time              time.Time    `json:"time"`
	RunwayWarnSeconds float64      `json:"runwayWarnSeconds"`
	Buffers           []bufferJSON `json:"buffers"`
}

func getBuffers(t *testing.T, s *opsServer) buffersJSON {
	t.Helper()
	got := s.get(t, "/api/v1/segment/buffers")
	if got.status != 200 || !strings.HasPrefix(got.ctype, "application/json") {
		t.Fatalf("GET /api/v1/segment/buffers = %d %q %s", got.status, got.ctype, got.body)
	}
	var b buffersJSON
	if err := json.Unmarshal([]byte(got.body), &b); err != nil {
		t.Fatalf("buffers JSON %s: %v", got.body, err)
	}
	return b
}

func TestSegmentBuffersJSON(t *testing.T) {
	const big = int64(1) << 60 // far past 2^53: must travel as a string
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{},
		store.Row{BizTag: "big", MaxID: big, Step: 1000},
		store.Row{BizTag: "idle", MaxID: 1, Step: 10})
	for range 200 {
		if got := s.get(t, "/api/segment/get/big"); got.status != 200 {
			t.Fatalf("GET big = %d %s", got.status, got.body)
		}
	}
	first := getBuffers(t, s)
	time.Sleep(300 * time.Millisecond)
	for range 100 {
		s.get(t, "/api/segment/get/big")
	}
	waittest.For(t, 10*time.Second, "big's next segment", func() bool { return getBuffers(t, s).Buffers[0].NextReady })
	got := getBuffers(t, s)

	if len(got.Buffers) != 2 || got.Buffers[0].BizTag != "big" || got.Buffers[1].BizTag != "idle" {
		t.Fatalf("buffers = %+v, want big and idle in that order", got.Buffers)
	}
	if got.RunwayWarnSeconds != 60 {
		t.Errorf("runwayWarnSeconds = %v, want the default 60", got.RunwayWarnSeconds)
	}
	b := got.Buffers[0]
	cur, next := b.Segments[b.Pos], b.Segments[1-b.Pos]
	tests := []struct {
		name      string
		got, want any
	}{
		{"initOk", b.InitOK, true},
		{"nextReady", b.NextReady, true},
		{"current.current", cur.Current, true},
		{"next.current", next.Current, false},
		// The row started at max_id 2^60: the first segment is [2^60, 2^60+1000).
		{"current.value", cur.Value, "1152921504606847276"},
		{"current.max", cur.Max, "1152921504606847976"},
		{"current.idle", cur.Idle, "700"},
		{"current.used", cur.Used, 0.3},
		{"next.max", next.Max, "1152921504606848976"},
		{"step", b.Step, int64(1000)},
		{"minStep", b.MinStep, int64(1000)},
		{"issued", b.Issued, "300"},
		{"remaining", b.Remaining, "1700"},
		{"stepHistory", len(b.StepHistory), 1},
		{"idle initOk", got.Buffers[1].InitOK, false},
		{"idle runway", got.Buffers[1].RunwaySeconds == nil, true},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if b.LastLoad == nil || b.LastLoadLatencySeconds <= 0 {
		t.Errorf("lastLoad = %v, latency %v s, want a load time and a positive latency", b.LastLoad, b.LastLoadLatencySeconds)
	}
	if b.Rate <= 0 || b.RunwaySeconds == nil || *b.RunwaySeconds <= 0 {
		t.Errorf("rate = %v, runway = %v, want both positive after 300 IDs in %v", b.Rate, b.RunwaySeconds, got.Time.Sub(first.Time))
	}
	if b.RunwaySeconds != nil {
		if want := 1700 / b.Rate; *b.RunwaySeconds < want*0.99 || *b.RunwaySeconds > want*1.01 {
			t.Errorf("runway = %v s, want remaining/rate = %v", *b.RunwaySeconds, want)
		}
	}
}

func TestSegmentBuffersDisabled(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(api.Deps{}))
	defer srv.Close()
	for _, path := range []string{"/api/v1/segment/buffers", "/cache", "/db"} {
		if got := do(t, "GET", srv.URL+path); got.status != 503 {
			t.Errorf("GET %s with segment mode off = %d, want 503", path, got.status)
		}
	}
}

func TestDashboardFiles(t *testing.T) {
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{}, demo)
	tests := []struct {
		path, ctype, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script src="/dashboard/app.js"`},
		{"/dashboard/app.js", "text/javascript; charset=utf-8", "BigInt"},
		{"/dashboard/style.css", "text/css; charset=utf-8", ".bits"},
	}
	for _, tt := range tests {
		got := s.get(t, tt.path)
		if got.status != 200 || got.ctype != tt.ctype || !strings.Contains(got.body, tt.contains) {
			t.Errorf("GET %s = %d %q (contains %q: %v), want 200 %q", tt.path, got.status, got.ctype,
				tt.contains, strings.Contains(got.body, tt.contains), tt.ctype)
		}
		// Nothing may come from elsewhere: the page works offline.
		for _, ext := range []string{"http://", "https://", "//cdn"} {
			if strings.Contains(got.body, ext) {
				t.Errorf("GET %s refers to %q; the dashboard must not load anything from elsewhere", tt.path, ext)
			}
		}
	}
}
