package clocktest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

var _ snowflake.Clock = (*clocktest.Clock)(nil)

func TestClock(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	c := clocktest.New(start)
	c.Sleep(6 * time.Millisecond)
	c.Add(-2 * time.Millisecond)
	if got, want := c.Now(), start.Add(4*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
	c.Freeze(true)
	c.Sleep(time.Second)
	if got, want := c.Now(), start.Add(4*time.Millisecond); !got.Equal(want) {
		t.Fatalf("frozen Now() = %v, want %v", got, want)
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() after Set = %v, want %v", got, start)
	}
	if got, want := c.Sleeps(), []time.Duration{6 * time.Millisecond, time.Second}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Sleeps() = %v, want %v", got, want)
	}
}

func TestClockConcurrent(t *testing.T) {
	c := clocktest.NewMillis(0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Sleep(time.Millisecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), time.UnixMilli(8000); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
}
