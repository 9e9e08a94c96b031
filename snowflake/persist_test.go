package snowflake_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

// TestSealRestartsAtOnce: after Seal (a graceful shutdown) the stored mark is the last issued
// millisecond + 1, so a restart 1 ms later issues at once, above every earlier ID; without Seal
// (a crash) the restart waits for the mark stored ahead of the clock.
func TestSealRestartsAtOnce(t *testing.T) {
	ctx := context.Background()
	for _, seal := range []bool{true, false} {
		t.Run(map[bool]string{true: "graceful", false: "crash"}[seal], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hw")
			clock := clocktest.New(start)
			g := newGenerator(t, snowflake.Settings{Clock: clock, Source: snowflake.NewStaticSource(1, path)})
			var last int64
			for range 3 {
				last = mustNext(t, g)
				clock.Add(time.Millisecond)
			}
			if seal {
				if err := g.Seal(ctx); err != nil {
					t.Fatalf("Seal() = %v", err)
				}
				if _, err := g.Next(ctx); !errors.Is(err, snowflake.ErrSealed) {
					t.Errorf("Next() after Seal = %v, want %v", err, snowflake.ErrSealed)
				}
				if err := g.Ready(); !errors.Is(err, snowflake.ErrSealed) {
					t.Errorf("Ready() after Seal = %v, want %v", err, snowflake.ErrSealed)
				}
				b, _ := os.ReadFile(path)
				lastMs := snowflake.Decompose(last).Time().UnixMilli()
				if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(lastMs+1, 10) {
					t.Errorf("high-water file after Seal = %s, want the last issued ms + 1 = %d", got, lastMs+1)
				}
			}
			g2 := newGenerator(t, snowflake.Settings{Clock: clock, Source: snowflake.NewStaticSource(1, path)})
			id, err := g2.Next(ctx)
			if seal {
				if err != nil {
					t.Fatalf("first Next() after a graceful restart = %v, want an ID", err)
				}
				if id <= last {
					t.Errorf("first ID after the restart %d, not above the last before %d", id, last)
				}
			} else if !errors.Is(err, snowflake.ErrClockBehindMark) {
				t.Errorf("first Next() after a crash = %d, %v, want %v (the mark stored ahead)", id, err, snowflake.ErrClockBehindMark)
			}
		})
	}
}

// TestSealWithoutIDs keeps the stored mark when nothing was issued, and with a HighWater that
// cannot store an exact mark.
func TestSealWithoutIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw")
	if err := os.WriteFile(path, []byte("1700000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := clocktest.New(time.UnixMilli(1700000000000).Add(-time.Second))
	g := newGenerator(t, snowflake.Settings{Clock: clock, Source: snowflake.NewStaticSource(1, path)})
	if err := g.Seal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != "1700000000000" {
		t.Errorf("file after Seal without IDs = %q, want the mark unchanged", b)
	}
	g2 := newGenerator(t, snowflake.Settings{Clock: clocktest.New(start), HighWater: &recordingHighWater{}})
	mustNext(t, g2)
	if err := g2.Seal(context.Background()); err != nil {
		t.Errorf("Seal() with a HighWater without StoreFinal = %v, want nil", err)
	}
}
