package leafserver_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestDatabaseCutKeepsServing: with the database cut after warm-up the
// server serves its buffered IDs, then answers -3 within the wait timeout
// (never a made-up ID), and recovers by itself when the database is back.
func TestDatabaseCutKeepsServing(t *testing.T) {
	dir := t.TempDir()
	direct := dbtest.Postgres(t)
	st := openStore(t, direct)
	if err := st.Create(t.Context(), store.Row{BizTag: "cut", MaxID: 1, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	px := faultproxy.Start(t, "127.0.0.1:5432")
	viaProxy := strings.Replace(direct, "127.0.0.1:5432", px.Addr(), 1)
	if viaProxy == direct {
		t.Fatalf("cannot route %s through the proxy", dsn.Redact(direct))
	}
	p := startServer(t, dir, "--segment-dsn", viaProxy, "--wait-timeout", "300ms")
	seen := map[int64]bool{}
	take := func() (int64, int, string) {
		status, body, err := p.get(t.Context(), "/api/segment/get/cut")
		if err != nil {
			t.Fatalf("request failed: %v", err)
		}
		if status != 200 {
			return 0, status, body
		}
		n, _ := strconv.ParseInt(body, 10, 64)
		if seen[n] {
			t.Fatalf("duplicate ID %d", n)
		}
		seen[n] = true
		return n, status, body
	}
	for i := 0; i < 300; i++ { // > 10% used: the next segment is loaded
		take()
	}
	// Wait for the prefetched segment, not a fixed time: a load still in
	// flight when max_id is read would hand out IDs past it after the cut.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, body, err := p.get(t.Context(), "/api/v1/segment/buffers?prefix=cut")
		if err == nil && status == 200 && strings.Contains(body, `"nextReady":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("next segment of cut not ready within 20 s: %d %s %v", status, body, err)
		}
	}
	maxBefore := maxID(t, st, "cut")
	px.Cut()
	served := 0
	var failed bool
	for i := 0; i < 10_000; i++ {
		start := time.Now()
		id, status, body := take()
		if status == 200 {
			if id >= maxBefore {
				t.Fatalf("ID %d handed out while the DB was cut, but max_id was %d", id, maxBefore)
			}
			served++
			continue
		}
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Errorf("failure answered after %v, want within the 300ms wait timeout (+slack)", elapsed)
		}
		if status != 500 || !strings.Contains(body, "id=-3") {
			t.Fatalf("while cut: %d %s, want 500 with id=-3", status, body)
		}
		failed = true
		break
	}
	if !failed {
		t.Fatalf("served 10000 IDs with the database cut; buffers cannot hold that many")
	}
	if want := int(maxBefore - 1 - 300); served < want-1 {
		t.Errorf("served %d buffered IDs after the cut, want about %d (both segments)", served, want)
	}
	t.Logf("served %d buffered IDs after the cut (max_id %d), then -3", served, maxBefore)
	px.Restore(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, status, _ := take(); status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not recover within 20s of the database coming back")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
