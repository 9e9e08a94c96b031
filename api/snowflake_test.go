package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

func newSnowflakeServer(t *testing.T, worker int64) *httptest.Server {
	t.Helper()
	gen, src := newStaticSnowflake(t, worker)
	srv := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: gen, SnowflakeSource: src}))
	t.Cleanup(srv.Close)
	return srv
}

// newStaticSnowflake returns a generator on a static worker ID source, its
// high-water mark in a file of the test's temporary directory, wired as
// leaf-server wires it.
func newStaticSnowflake(t *testing.T, worker int64) (*snowflake.Generator, *snowflake.StaticSource) {
	t.Helper()
	src := snowflake.NewStaticSource(worker, filepath.Join(t.TempDir(), "snowflake.highwater"))
	gen, err := snowflake.New(t.Context(), snowflake.Settings{Source: src})
	if err != nil {
		t.Fatalf("snowflake.New: %v", err)
	}
	return gen, src
}

type idView struct {
	ID         string `json:"id"`
	Timestamp  int64  `json:"timestamp"`
	Time       string `json:"time"`
	Worker     int64  `json:"worker"`
	Datacenter int64  `json:"datacenter"`
	Machine    int64  `json:"machine"`
	Sequence   int64  `json:"sequence"`
	Bits       struct {
		Sign, Time, Worker, Sequence, All string
	} `json:"bits"`
}

// TestSnowflakeEncodeDecodeSpecExamples checks the worked examples of
// docs/contract.md §6 over HTTP.
func TestSnowflakeEncodeDecodeSpecExamples(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(api.Deps{})) // decoding needs no generator
	defer srv.Close()
	tests := []struct {
		give string
		want idView
	}{
		{"/api/v1/snowflake/encode?timestamp=1288834975657&datacenter=1&machine=1&sequence=0",
			idView{ID: "4194439168", Timestamp: 1288834975657, Worker: 33, Datacenter: 1, Machine: 1, Sequence: 0}},
		{"/api/v1/snowflake/encode?timestamp=1700000000000&datacenter=7&machine=13&sequence=4095",
			idView{ID: "1724551110457221119", Timestamp: 1700000000000, Time: "2023-11-14T22:13:20.000Z", Worker: 237, Datacenter: 7, Machine: 13, Sequence: 4095}},
		{"/api/v1/snowflake/encode?timestamp=1700000000000&worker=237&sequence=4095",
			idView{ID: "1724551110457221119", Timestamp: 1700000000000, Time: "2023-11-14T22:13:20.000Z", Worker: 237, Datacenter: 7, Machine: 13, Sequence: 4095}},
		{"/api/v1/snowflake/decode/1724551110457221119",
			idView{ID: "1724551110457221119", Timestamp: 1700000000000, Time: "2023-11-14T22:13:20.000Z", Worker: 237, Datacenter: 7, Machine: 13, Sequence: 4095}},
	}
	for _, tt := range tests {
		got := do(t, "GET", srv.URL+tt.give)
		if got.status != 200 {
			t.Fatalf("GET %s = %d %s, want 200", tt.give, got.status, got.body)
		}
		var v idView
		if err := json.Unmarshal([]byte(got.body), &v); err != nil {
			t.Fatalf("GET %s: %v", tt.give, err)
		}
		if v.ID != tt.want.ID || v.Timestamp != tt.want.Timestamp || v.Worker != tt.want.Worker ||
			v.Datacenter != tt.want.Datacenter || v.Machine != tt.want.Machine || v.Sequence != tt.want.Sequence ||
			(tt.want.Time != "" && v.Time != tt.want.Time) {
			t.Errorf("GET %s = %+v, want %+v", tt.give, v, tt.want)
		}
		if len(v.Bits.All) != 64 || v.Bits.Sign+v.Bits.Time+v.Bits.Worker+v.Bits.Sequence != v.Bits.All ||
			len(v.Bits.Time) != 41 || len(v.Bits.Worker) != 10 || len(v.Bits.Sequence) != 12 {
			t.Errorf("GET %s bits = %+v, want 1+41+10+12 binary digits", tt.give, v.Bits)
		}
		if n, _ := strconv.ParseUint(v.Bits.All, 2, 64); strconv.FormatUint(n, 10) != v.ID {
			t.Errorf("GET %s bits %s = %d, want %s", tt.give, v.Bits.All, n, v.ID)
		}
	}
}

func TestSnowflakeBadInput(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(api.Deps{}))
	defer srv.Close()
	for _, path := range []string{
		"/api/v1/snowflake/decode/abc",
		"/api/v1/snowflake/decode/-5",
		"/api/v1/snowflake/decode/99999999999999999999",
		"/api/v1/snowflake/encode",
		"/api/v1/snowflake/encode?timestamp=x",
		"/api/v1/snowflake/encode?timestamp=1700000000000&worker=1024",
		"/api/v1/snowflake/encode?timestamp=1700000000000&datacenter=32&machine=1",
		"/api/v1/snowflake/encode?timestamp=1700000000000&worker=1&datacenter=1&machine=1",
		"/api/v1/snowflake/encode?timestamp=1000&worker=1",
		"/api/v1/snowflake/encode?timestamp=1700000000000&sequence=4096",
		"/decodeSnowflakeId",
	} {
		got := do(t, "GET", srv.URL+path)
		if got.status != 400 || !strings.Contains(got.ctype, "json") {
			t.Errorf("GET %s = %d %q %s, want 400 JSON", path, got.status, got.ctype, got.body)
		}
	}
	if got := do(t, "GET", srv.URL+"/api/v1/snowflake/status"); got.status != 503 || !strings.Contains(got.body, `"code":"mode_disabled"`) {
		t.Errorf("status with snowflake off = %d %s, want 503 with code mode_disabled", got.status, got.body)
	}
}

// TestLeafDecodeSnowflakeID checks Leaf's /decodeSnowflakeId answer shape.
func TestLeafDecodeSnowflakeID(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(api.Deps{}))
	defer srv.Close()
	got := do(t, "GET", srv.URL+"/decodeSnowflakeId?snowflakeId=1724551110457221119")
	var m map[string]string
	if err := json.Unmarshal([]byte(got.body), &m); err != nil || got.status != 200 {
		t.Fatalf("decodeSnowflakeId = %d %s (%v), want 200 JSON of strings", got.status, got.body, err)
	}
	wantTS := "1700000000000(" + time.UnixMilli(1700000000000).Format("2006-01-02 15:04:05.000") + ")"
	if m["timestamp"] != wantTS || m["workerId"] != "237" || m["sequenceId"] != "4095" || len(m) != 3 {
		t.Errorf("decodeSnowflakeId = %v, want timestamp %s workerId 237 sequenceId 4095", m, wantTS)
	}
}

// TestSnowflakeGetLeafFormat issues IDs over the Leaf route from many
// goroutines: all unique, all decode to the configured worker ID.
func TestSnowflakeGetLeafFormat(t *testing.T) {
	srv := newSnowflakeServer(t, 42)
	const n, workers = 2000, 8
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/workers; i++ {
				got := do(t, "POST", srv.URL+"/api/snowflake/get/anything.at.all")
				id, err := strconv.ParseInt(got.body, 10, 64)
				if got.status != 200 || err != nil {
					t.Errorf("snowflake get = %d %q, want 200 decimal", got.status, got.body)
					return
				}
				if p := snowflake.DefaultLayout().Decompose(id); p.Worker != 42 {
					t.Errorf("ID %d has worker %d, want 42", id, p.Worker)
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate snowflake ID %d", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("got %d unique IDs, want %d", len(seen), n)
	}
	st := do(t, "GET", srv.URL+"/api/v1/snowflake/status")
	if st.status != 200 || !strings.Contains(st.body, `"workerId":42`) || !strings.Contains(st.body, `"source":"static"`) {
		t.Errorf("status = %d %s, want 200 with workerId 42 and source static", st.status, st.body)
	}
	if got := do(t, "GET", srv.URL+"/api/snowflake/get/"+strings.Repeat("x", 129)); got.status != 400 {
		t.Errorf("snowflake get with a 129-character key = %d, want 400", got.status)
	}
}

// markAhead is a snowflake.HighWater whose persisted mark lies an hour
// ahead: every Next is refused with ErrClockBehindMark, as after a restart
// whose clock is behind the previous run's mark.
type markAhead struct{}

func (markAhead) Load(context.Context) (time.Time, error) { return time.Now().Add(time.Hour), nil }
func (markAhead) Store(context.Context, time.Time) error  { return nil }

// TestClockBehindRefusalsLogRateLimited: 1,000 refusals while the clock is
// behind the persisted high-water mark all answer Leaf's -3 body, but log
// one warn line per second, the next carrying the count held back.
func TestClockBehindRefusalsLogRateLimited(t *testing.T) {
	gen, err := snowflake.New(t.Context(), snowflake.Settings{WorkerID: 3, HighWater: markAhead{}})
	if err != nil {
		t.Fatalf("snowflake.New: %v", err)
	}
	clock := clocktest.New(time.Now())
	logs := &syncBuffer{}
	srv := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: gen, Now: clock.Now,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}))
	t.Cleanup(srv.Close)
	paths := []string{"/api/snowflake/get/x", "/api/v1/snowflake?count=2"}
	for i := range 1000 {
		got := do(t, "GET", srv.URL+paths[i%2])
		if got.status != 500 && got.status != 503 {
			t.Fatalf("GET %s = %d %s, want a refusal", paths[i%2], got.status, got.body)
		}
	}
	clock.Add(time.Second)
	if got := do(t, "GET", srv.URL+paths[0]); got.status != 500 || !strings.Contains(got.body, "Result{id=-3") {
		t.Fatalf("GET %s = %d %s, want 500 with code -3", paths[0], got.status, got.body)
	}
	warns := logs.warns(t)
	if len(warns) != 2 {
		t.Fatalf("%d warn lines for 1,001 refusals a second apart, want 2: %v", len(warns), warns)
	}
	if !strings.Contains(warns[0]["err"].(string), "high-water mark") || warns[0]["suppressed"] != nil {
		t.Errorf("first line %v, want the refusal and no suppressed count", warns[0])
	}
	if warns[1]["suppressed"] != float64(999) {
		t.Errorf("second line %v, want suppressed=999", warns[1])
	}
}

// TestFailureFloodsLogRateLimited: a lost lease refuses every snowflake
// request; 600 refusals log one warn line, and a failure of another kind
// (a clock behind the persisted mark) still logs its own first line at
// once. Before the limit covered every failure, the lease flood wrote a
// line per request.
func TestFailureFloodsLogRateLimited(t *testing.T) {
	clock := clocktest.New(time.Now())
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	lost, err := snowflake.New(t.Context(), snowflake.Settings{WorkerID: 4, Clock: clock,
		Lease: fixedLease{exp: time.Unix(0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	behind, err := snowflake.New(t.Context(), snowflake.Settings{WorkerID: 3, HighWater: markAhead{}})
	if err != nil {
		t.Fatal(err)
	}
	srvLost := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: lost, Now: clock.Now, Logger: logger}))
	t.Cleanup(srvLost.Close)
	srvBehind := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: behind, Now: clock.Now, Logger: logger}))
	t.Cleanup(srvBehind.Close)
	for i := range 600 {
		path := []string{"/api/snowflake/get/x", "/api/v1/snowflake?count=2"}[i%2]
		if got := do(t, "GET", srvLost.URL+path); got.status != 500 && got.status != 503 {
			t.Fatalf("GET %s with the lease lost = %d %s, want a refusal", path, got.status, got.body)
		}
	}
	if got := do(t, "GET", srvBehind.URL+"/api/snowflake/get/x"); got.status != 500 {
		t.Fatalf("GET with the clock behind the mark = %d %s, want 500", got.status, got.body)
	}
	warns := logs.warns(t)
	// Leaf's route (-1) and the batch route (503 lease_expired) are one kind per Leaf code:
	// the lost lease answers -1 on both, so one line, then the clock's line.
	if len(warns) != 2 {
		t.Fatalf("%d warn lines for 600 lease refusals and 1 clock refusal, want 2: %v", len(warns), warns)
	}
	if !strings.Contains(warns[0]["err"].(string), "lease") || !strings.Contains(warns[1]["err"].(string), "high-water mark") {
		t.Errorf("warn lines %v, want the lease refusal, then the clock refusal", warns)
	}
	clock.Add(time.Second)
	if got := do(t, "GET", srvLost.URL+"/api/snowflake/get/x"); got.status != 500 {
		t.Fatalf("GET with the lease lost = %d, want 500", got.status)
	}
	last := logs.lines(t)
	if l := last[len(last)-1]; l["level"] != "WARN" || l["suppressed"] == nil {
		t.Errorf("line a second later %v, want a warn line with the suppressed count", l)
	}
}

// fakeSource is a worker ID source whose readiness, heartbeat and details
// the test sets, as a lost SQL lease or a ZooKeeper node reports them.
type fakeSource struct {
	*snowflake.StaticSource
	ready     error
	heartbeat time.Time
}

func (s *fakeSource) Name() string             { return "sql" }
func (s *fakeSource) Ready() error             { return s.ready }
func (s *fakeSource) LastHeartbeat() time.Time { return s.heartbeat }
func (s *fakeSource) Details() any             { return map[string]any{"generation": 7, "lost": s.ready != nil} }

// TestSnowflakeSourceOnProbes: the status page, /readyz and /metrics read
// the one worker ID source given in Deps.
func TestSnowflakeSourceOnProbes(t *testing.T) {
	src := &fakeSource{StaticSource: snowflake.NewStaticSource(5, filepath.Join(t.TempDir(), "hw"))}
	gen, err := snowflake.New(t.Context(), snowflake.Settings{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	src.heartbeat = now.Add(-1500 * time.Millisecond)
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: gen, SnowflakeSource: src, Registerer: reg,
		Now: func() time.Time { return now }}))
	t.Cleanup(srv.Close)

	st := do(t, "GET", srv.URL+"/api/v1/snowflake/status")
	var status struct {
		WorkerID    int64  `json:"workerId"`
		Source      string `json:"source"`
		SourceState struct {
			Generation int64 `json:"generation"`
			Lost       bool  `json:"lost"`
		} `json:"sourceState"`
	}
	if err := json.Unmarshal([]byte(st.body), &status); err != nil || status.WorkerID != 5 || status.Source != "sql" || status.SourceState.Generation != 7 {
		t.Errorf("GET /api/v1/snowflake/status = %d %s (%v), want worker 5, source sql, sourceState generation 7", st.status, st.body, err)
	}
	if got := do(t, "GET", srv.URL+"/readyz"); got.status != 200 || !strings.Contains(got.body, `"snowflake":"ok"`) {
		t.Errorf("GET /readyz = %d %s, want 200 with snowflake ok", got.status, got.body)
	}
	if got, ok := value(t, reg, "leaf_snowflake_source_heartbeat_age_seconds"); !ok || got != 1.5 {
		t.Errorf("leaf_snowflake_source_heartbeat_age_seconds = %v (found %v), want 1.5", got, ok)
	}
	if got, ok := value(t, reg, "leaf_snowflake_worker_id", "source", "sql"); !ok || got != 5 {
		t.Errorf("leaf_snowflake_worker_id{source=\"sql\"} = %v (found %v), want 5", got, ok)
	}

	src.ready = errors.New("worker ID lease lost: restart leaf-server to claim a new one")
	got := do(t, "GET", srv.URL+"/readyz")
	if got.status != 503 || !strings.Contains(got.body, `"snowflake":"worker ID lease lost: restart leaf-server to claim a new one"`) {
		t.Errorf("GET /readyz with the lease lost = %d %s, want 503 with the source's reason", got.status, got.body)
	}
}

// TestReadyBehindMark: while the clock is behind the high-water mark the
// generator loaded at start, /readyz answers 503 and says by how much.
func TestReadyBehindMark(t *testing.T) {
	gen, err := snowflake.New(t.Context(), snowflake.Settings{WorkerID: 3, HighWater: markAhead{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: gen}))
	t.Cleanup(srv.Close)
	got := do(t, "GET", srv.URL+"/readyz")
	const says = "clock behind the persisted high-water mark by "
	i := strings.Index(got.body, says)
	if got.status != 503 || i < 0 {
		t.Fatalf("GET /readyz with the mark an hour ahead = %d %s, want 503 saying the clock is behind", got.status, got.body)
	}
	by, _, _ := strings.Cut(got.body[i+len(says):], ":")
	if d, err := time.ParseDuration(by); err != nil || d < 59*time.Minute || d > time.Hour {
		t.Errorf("GET /readyz says the clock is behind by %q, want about an hour (the message may round it)", by)
	}
}
