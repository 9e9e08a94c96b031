package api_test

import (
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/snowflake"
)

// TestSnowflakeOperationsMetrics: the series the alert rules of deploy/prometheus read.
// leaf_snowflake_source_ready follows the source's Ready; the worker range series follow
// Deps.WorkerRange and are absent before its first scan; the peer offset is absent without
// peers; leaf_snowflake_clock_behind_mark_seconds is 0 with the clock past the mark.
func TestSnowflakeOperationsMetrics(t *testing.T) {
	src := &fakeSource{StaticSource: snowflake.NewStaticSource(5, filepath.Join(t.TempDir(), "hw"))}
	gen, err := snowflake.New(t.Context(), snowflake.Settings{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	var (
		rng     api.WorkerRange
		scanned bool
	)
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: gen, SnowflakeSource: src, Registerer: reg,
		WorkerRange: func() (api.WorkerRange, bool) { return rng, scanned }}))
	t.Cleanup(srv.Close)

	if got, ok := value(t, reg, "leaf_snowflake_source_ready"); !ok || got != 1 {
		t.Errorf("leaf_snowflake_source_ready = %v (found %v), want 1", got, ok)
	}
	if got, ok := value(t, reg, "leaf_snowflake_clock_behind_mark_seconds"); !ok || got != 0 {
		t.Errorf("leaf_snowflake_clock_behind_mark_seconds = %v (found %v), want 0", got, ok)
	}
	for _, name := range []string{"leaf_snowflake_worker_ids_free", "leaf_snowflake_worker_ids_range", "leaf_snowflake_peer_clock_offset_seconds"} {
		if _, ok := value(t, reg, name); ok {
			t.Errorf("%s present before the first range scan", name)
		}
	}

	rng, scanned = api.WorkerRange{Min: 100, Max: 199, Held: 97}, true
	tests := []struct {
		give string
		want float64
	}{
		{"leaf_snowflake_worker_ids_range", 100},
		{"leaf_snowflake_worker_ids_free", 3},
	}
	for _, tt := range tests {
		if got, ok := value(t, reg, tt.give); !ok || got != tt.want {
			t.Errorf("%s = %v (found %v), want %v", tt.give, got, ok, tt.want)
		}
	}
	if _, ok := value(t, reg, "leaf_snowflake_peer_clock_offset_seconds"); ok {
		t.Error("leaf_snowflake_peer_clock_offset_seconds present without peers")
	}
	rng = api.WorkerRange{Min: 0, Max: 3, Held: 9, Peers: 2, PeerOffset: -1500 * time.Millisecond}
	if got, ok := value(t, reg, "leaf_snowflake_worker_ids_free"); !ok || got != 0 {
		t.Errorf("leaf_snowflake_worker_ids_free with more holders than IDs = %v (found %v), want 0", got, ok)
	}
	if got, ok := value(t, reg, "leaf_snowflake_peer_clock_offset_seconds"); !ok || got != -1.5 {
		t.Errorf("leaf_snowflake_peer_clock_offset_seconds = %v (found %v), want -1.5", got, ok)
	}

	src.ready = errors.New("lease lost")
	if got, ok := value(t, reg, "leaf_snowflake_source_ready"); !ok || got != 0 {
		t.Errorf("leaf_snowflake_source_ready with the lease lost = %v (found %v), want 0", got, ok)
	}
}

// TestClockBehindMarkMetric: a generator whose loaded mark is an hour ahead reports the
// clock about an hour behind it.
func TestClockBehindMarkMetric(t *testing.T) {
	gen, err := snowflake.New(t.Context(), snowflake.Settings{WorkerID: 3, HighWater: markAhead{}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	api.NewHandler(api.Deps{Snowflake: gen, Registerer: reg})
	got, ok := value(t, reg, "leaf_snowflake_clock_behind_mark_seconds")
	if !ok || got < 3500 || got > 3600 {
		t.Errorf("leaf_snowflake_clock_behind_mark_seconds = %v (found %v), want about 3600", got, ok)
	}
	if got, ok := value(t, reg, "leaf_snowflake_source_ready"); !ok || got != 1 {
		t.Errorf("leaf_snowflake_source_ready without a source = %v (found %v), want 1", got, ok)
	}
}
