package sqllease_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/sqllease"
)

// TestSource: a Lease given to the generator as its Source backs IDs while it is renewed;
// after a loss Ready says so and the generator refuses; the status page shows its State with
// the fields leaf-server has always shown.
func TestSource(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t)
	l := start(t, st, with(fast, "a"))
	if err := l.WaitNoHistory(ctx); err != nil {
		t.Fatal(err)
	}
	var src snowflake.Source = l
	if src.Name() != "sql" || src.Ready() != nil || !src.LastHeartbeat().Equal(l.State().LastRenewal) {
		t.Errorf("Name %q, Ready %v, LastHeartbeat %v; want sql, nil, State().LastRenewal %v",
			src.Name(), src.Ready(), src.LastHeartbeat(), l.State().LastRenewal)
	}
	g, err := snowflake.New(ctx, snowflake.Settings{Source: l})
	if err != nil {
		t.Fatal(err)
	}
	if g.WorkerID() != l.WorkerID() {
		t.Errorf("generator's WorkerID() = %d, want the leased %d", g.WorkerID(), l.WorkerID())
	}
	if _, err := g.Next(ctx); err != nil {
		t.Fatalf("Next() = %v", err)
	}

	b, err := json.Marshal(src.Details())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"closed", "consecutiveFailures", "dbExpires", "expires", "generation", "heldUntil", "highWater", "lastError",
		"lastRenewal", "lost", "marginMs", "owner", "renewFailures", "renewMs", "renewals", "ttlMs", "workerId"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
		t.Errorf("Details() keys = %v, want %v", keys, want)
	}
	if got["owner"] != "a" || got["ttlMs"] != float64(fast.TTL.Milliseconds()) || got["lost"] != false || got["expires"] == "" {
		t.Errorf("Details() = %s, want owner a, ttlMs %d, not lost, an expiry", b, fast.TTL.Milliseconds())
	}

	if err := st.ReleaseWorker(ctx, l.WorkerID(), l.Generation(), 0); err != nil {
		t.Fatal(err)
	}
	start(t, st, with(fast, "taker"))
	select {
	case <-l.Lost():
	// The next renewal (every 200 ms) sees the other generation; the bound is generous
	// because a loaded CI machine under -race has delayed that renewal past 2 s.
	case <-time.After(10 * time.Second):
		t.Fatal("Lost() not closed 10 s after another generation took the worker ID")
	}
	if err := src.Ready(); err == nil || !strings.Contains(err.Error(), "lease lost") {
		t.Errorf("Ready() after the loss = %v, want an error saying the lease is lost", err)
	}
	if exp := src.Expiry(); exp.IsZero() || !exp.Before(time.Now()) {
		t.Errorf("Expiry() after the loss = %v, want an instant in the past (the zero time means never)", exp)
	}
	if _, err := g.Next(ctx); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Errorf("Next() after the loss = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
	if got := l.Details().(map[string]any); got["lost"] != true || got["expires"] != "" {
		t.Errorf("Details() after the loss: lost %v, expires %q; want true and \"\"", got["lost"], got["expires"])
	}
}

// TestSourceClosed: after Close the Lease is not ready and its expiry lies in the past.
func TestSourceClosed(t *testing.T) {
	l := start(t, openSQLite(t), with(fast, "a"))
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Ready(); !errors.Is(err, sqllease.ErrClosed) {
		t.Errorf("Ready() after Close = %v, want %v", err, sqllease.ErrClosed)
	}
	if exp := l.Expiry(); exp.IsZero() || !exp.Before(time.Now()) {
		t.Errorf("Expiry() after Close = %v, want an instant in the past", exp)
	}
}
