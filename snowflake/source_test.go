package snowflake_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

// TestStaticSource: the generator takes the worker ID and the high-water mark from the
// source; the mark lands in the file, and a second generator on the same file starts above it.
func TestStaticSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snowflake-7.highwater")
	src := snowflake.NewStaticSource(7, path)
	if src.Name() != "static" || src.WorkerID() != 7 || src.Path() != path {
		t.Errorf("NewStaticSource(7, %q): Name %q, WorkerID %d, Path %q", path, src.Name(), src.WorkerID(), src.Path())
	}
	if !src.Expiry().IsZero() || src.Ready() != nil || !src.LastHeartbeat().IsZero() || src.Details() != nil {
		t.Errorf("static source: Expiry %v, Ready %v, LastHeartbeat %v, Details %v; want zero, nil, zero, nil",
			src.Expiry(), src.Ready(), src.LastHeartbeat(), src.Details())
	}
	clock := clocktest.New(start)
	g := newGenerator(t, snowflake.Settings{Clock: clock, Source: src})
	if g.WorkerID() != 7 {
		t.Errorf("WorkerID() = %d, want 7", g.WorkerID())
	}
	mustNext(t, g)
	b, err := os.ReadFile(path)
	want := start.Add(snowflake.DefaultHighWaterWindow).UnixMilli()
	if err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(want, 10) {
		t.Errorf("high-water file = %q, %v, want %d", b, err, want)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Errorf("Close() = %v", err)
	}
	g2 := newGenerator(t, snowflake.Settings{Clock: clock, Source: snowflake.NewStaticSource(7, path)})
	if got := g2.Stats().Floor; got.UnixMilli() != want {
		t.Errorf("second generator: Stats().Floor = %v, want %v", got, time.UnixMilli(want))
	}
}

// leaseSource is a Source with a lease whose expiry the test moves.
type leaseSource struct {
	*snowflake.StaticSource
	expiryMillis atomic.Int64
}

func (s *leaseSource) Expiry() time.Time { return time.UnixMilli(s.expiryMillis.Load()) }

// TestSourceLease: a source whose Expiry is set at New is asked on every Next; past it, Next
// refuses with ErrLeaseExpired, and a renewal lets it issue again.
func TestSourceLease(t *testing.T) {
	clock := clocktest.New(start)
	src := &leaseSource{StaticSource: snowflake.NewStaticSource(3, filepath.Join(t.TempDir(), "hw"))}
	src.expiryMillis.Store(start.Add(time.Second).UnixMilli())
	g := newGenerator(t, snowflake.Settings{Clock: clock, Source: src})
	mustNext(t, g)
	clock.Add(time.Second)
	if _, err := g.Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Fatalf("Next() past the source's expiry = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
	src.expiryMillis.Store(start.Add(5 * time.Second).UnixMilli())
	mustNext(t, g)
}

// TestLeaseZeroExpiry: a Lease whose Expiry is the zero time never expires.
func TestLeaseZeroExpiry(t *testing.T) {
	clock := clocktest.New(start)
	g := newGenerator(t, snowflake.Settings{Clock: clock, Lease: fakeLease{}})
	mustNext(t, g)
	clock.Add(time.Hour)
	mustNext(t, g)
}

// TestSourceWithWorkerID: Source and WorkerID, HighWater or Lease together are refused.
func TestSourceWithWorkerID(t *testing.T) {
	src := snowflake.NewStaticSource(1, filepath.Join(t.TempDir(), "hw"))
	tests := map[string]snowflake.Settings{
		"WorkerID":  {Source: src, WorkerID: 2},
		"HighWater": {Source: src, HighWater: &recordingHighWater{}},
		"Lease":     {Source: src, Lease: fakeLease{}},
	}
	for name, give := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := snowflake.New(context.Background(), give); err == nil {
				t.Errorf("New(Source and %s) = nil, want an error", name)
			}
		})
	}
}
