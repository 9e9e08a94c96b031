package snowflake_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

// notReadySource is a static source whose Ready returns err.
type notReadySource struct {
	*snowflake.StaticSource
	err error
}

func (s notReadySource) Ready() error { return s.err }

// TestReady: Ready says why the generator cannot issue, exactly while Next refuses, and clears
// when the cause does.
func TestReady(t *testing.T) {
	ctx := context.Background()
	t.Run("fresh", func(t *testing.T) {
		g := newGenerator(t, snowflake.Settings{Clock: clocktest.New(start)})
		if err := g.Ready(); err != nil {
			t.Errorf("Ready() = %v, want nil", err)
		}
	})
	t.Run("clock behind the loaded mark", func(t *testing.T) {
		clock := clocktest.New(start)
		hw := &recordingHighWater{marks: []time.Time{start.Add(2 * time.Second)}}
		g := newGenerator(t, snowflake.Settings{Clock: clock, HighWater: hw})
		if err := g.Ready(); !errors.Is(err, snowflake.ErrClockBehindMark) || !strings.Contains(err.Error(), "by 2s") {
			t.Errorf("Ready() = %v, want %v by 2s", err, snowflake.ErrClockBehindMark)
		}
		clock.Add(2 * time.Second)
		if err := g.Ready(); err != nil {
			t.Errorf("Ready() after the clock passed the mark = %v, want nil", err)
		}
		mustNext(t, g)
	})
	t.Run("clock stepped back past the wait", func(t *testing.T) {
		clock := clocktest.New(start)
		g := newGenerator(t, snowflake.Settings{Clock: clock})
		mustNext(t, g)
		clock.Add(-time.Second)
		if _, err := g.Next(ctx); !errors.Is(err, snowflake.ErrClockBackwards) {
			t.Fatalf("Next() = %v, want %v", err, snowflake.ErrClockBackwards)
		}
		if err := g.Ready(); !errors.Is(err, snowflake.ErrClockBackwards) {
			t.Errorf("Ready() = %v, want %v", err, snowflake.ErrClockBackwards)
		}
		clock.Add(time.Second + time.Millisecond)
		if err := g.Ready(); err != nil {
			t.Errorf("Ready() after the clock caught up = %v, want nil", err)
		}
	})
	t.Run("step back within the wait is ready", func(t *testing.T) {
		clock := clocktest.New(start)
		g := newGenerator(t, snowflake.Settings{Clock: clock})
		mustNext(t, g)
		clock.Add(-2 * time.Millisecond)
		if err := g.Ready(); err != nil {
			t.Errorf("Ready() 2 ms behind (waited out by Next) = %v, want nil", err)
		}
	})
	t.Run("high-water mark not storable", func(t *testing.T) {
		clock := clocktest.New(start)
		hw := &failingHighWater{}
		g := newGenerator(t, snowflake.Settings{Clock: clock, HighWater: hw})
		mustNext(t, g)
		clock.Add(snowflake.DefaultHighWaterWindow)
		hw.storeErr = errors.New("store unavailable") // disk full
		if _, err := g.Next(ctx); !errors.Is(err, snowflake.ErrHighWater) {
			t.Fatalf("Next() = %v, want %v", err, snowflake.ErrHighWater)
		}
		if err := g.Ready(); !errors.Is(err, snowflake.ErrHighWater) || !strings.Contains(err.Error(), "store unavailable") {
			t.Errorf("Ready() = %v, want %v with the store's error", err, snowflake.ErrHighWater)
		}
		hw.storeErr = nil
		mustNext(t, g)
		if err := g.Ready(); err != nil {
			t.Errorf("Ready() after a good store = %v, want nil", err)
		}
	})
	t.Run("store abandoned by its request is no failure", func(t *testing.T) {
		hw := &failingHighWater{storeErr: context.Canceled}
		g := newGenerator(t, snowflake.Settings{Clock: clocktest.New(start), HighWater: hw})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, _ = g.Next(cctx)
		if err := g.Ready(); err != nil {
			t.Errorf("Ready() after a cancelled request = %v, want nil", err)
		}
	})
	t.Run("lease expired", func(t *testing.T) {
		clock := clocktest.New(start)
		g := newGenerator(t, snowflake.Settings{Clock: clock, Lease: fakeLease{start.Add(time.Second)}})
		if err := g.Ready(); err != nil {
			t.Errorf("Ready() before expiry = %v, want nil", err)
		}
		clock.Add(time.Second)
		if err := g.Ready(); !errors.Is(err, snowflake.ErrLeaseExpired) {
			t.Errorf("Ready() = %v, want %v", err, snowflake.ErrLeaseExpired)
		}
	})
	t.Run("source not ready", func(t *testing.T) {
		lost := errors.New("identity conflict: worker 4 held by 10.0.0.1:8080")
		src := notReadySource{StaticSource: snowflake.NewStaticSource(4, filepath.Join(t.TempDir(), "hw")), err: lost}
		g := newGenerator(t, snowflake.Settings{Clock: clocktest.New(start), Source: src})
		if err := g.Ready(); !errors.Is(err, lost) {
			t.Errorf("Ready() = %v, want the source's %v", err, lost)
		}
	})
}
