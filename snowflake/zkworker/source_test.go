package zkworker_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake"
)

// TestSource: a Worker as snowflake.Source gives the generator its worker ID and its mark,
// has a far-future expiry while its claim holds, is ready, reports its uploads as heartbeats, and shows its Status on the
// status page with the fields leaf-server has always shown.
func TestSource(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	o := options(t, addr, zktest.Name(t, addr), "8080")
	o.HeartbeatInterval = 50 * time.Millisecond
	w := claim(t, o)
	var src snowflake.Source = w
	if exp := src.Expiry(); src.Name() != "zookeeper" || !exp.After(time.Now()) || exp.After(time.Now().Add(o.SessionTimeout-o.Margin)) || src.Ready() != nil {
		t.Errorf("Name %q, Expiry %v, Ready %v; want zookeeper, within the session timeout − margin, nil", src.Name(), src.Expiry(), src.Ready())
	}
	g, err := snowflake.New(context.Background(), snowflake.Settings{Source: w})
	if err != nil {
		t.Fatal(err)
	}
	if g.WorkerID() != w.WorkerID() {
		t.Errorf("generator's WorkerID() = %d, want the claimed %d", g.WorkerID(), w.WorkerID())
	}
	if _, err := g.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.LastHeartbeat().IsZero() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if hb := w.LastHeartbeat(); !hb.Equal(w.Status().LastUpload) || hb.IsZero() {
		t.Errorf("LastHeartbeat() = %v, want Status().LastUpload %v, not zero", hb, w.Status().LastUpload)
	}

	b, err := json.Marshal(src.Details())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"address", "cachePath", "conflict", "expires", "lastContact", "lastUpload", "liveNode", "marginMs", "mark", "node", "session",
		"sessionTimeoutMs", "source", "uploadError", "uploaded", "workerId"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
		t.Errorf("Details() keys = %v, want %v", keys, want)
	}
	if got["workerId"] != float64(w.WorkerID()) || got["node"] != w.Status().Node || got["session"] != "StateHasSession" {
		t.Errorf("Details() = %s, want workerId %d, node %s, session StateHasSession", b, w.WorkerID(), w.Status().Node)
	}
}
