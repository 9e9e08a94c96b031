package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/waittest"
)

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestGCFloorRaisesGoal: with a small live heap the goal reaches the floor
// after a collection, and stop puts GOGC back.
func TestGCFloorRaisesGoal(t *testing.T) {
	const floor = 256 << 20 // far above this test's live heap and the 4 MiB default goal
	base := readGCPercent()
	if base <= 0 {
		t.Skip("GOGC is off")
	}
	runtime.GC()
	if g := heapGoal(); g >= floor {
		t.Fatalf("heap goal %d before gcFloor is already at the floor: the test cannot tell", g)
	}
	stop := gcFloor(floor, func(string) string { return "" })
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for heapGoal() < floor {
		if time.Now().After(deadline) {
			t.Fatalf("heap goal %d after collections, want ≥ %d (GOGC %d)", heapGoal(), floor, readGCPercent())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the cleanup runs on its own goroutine
	}
	// A second gcFloor while this one runs does nothing: GOGC is one
	// setting per process. Only time can show it: a tuning would run in a
	// cleanup after a collection, on the runtime's cleanup goroutines,
	// which tell nobody when they are done; so collect again at every look
	// of a short window.
	stop2 := gcFloor(2*floor, func(string) string { return "" })
	waittest.Quiet(t, 30*time.Millisecond, "a second gcFloor tuned GOGC while the first ran", func() bool {
		runtime.GC()
		return heapGoal() >= 2*floor
	})
	stop2()
	stop()
	stop() // twice is fine
	if got := readGCPercent(); got != base {
		t.Errorf("GOGC after stop = %d, want %d", got, base)
	}
	runtime.GC()
	if g := heapGoal(); g >= floor {
		t.Errorf("heap goal %d after stop, want the default again", g)
	}
}

// TestGCFloorLeavesGOGC: an operator's GOGC is left alone.
func TestGCFloorLeavesGOGC(t *testing.T) {
	base := readGCPercent()
	stop := gcFloor(256<<20, func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	})
	defer stop()
	// Only time can show that nothing tunes GOGC (TestGCFloorRaisesGoal).
	waittest.Quiet(t, 30*time.Millisecond, "GOGC tuned with GOGC set in the environment", func() bool {
		runtime.GC()
		return readGCPercent() != base
	})
}

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live, roots, floor uint64
		base, want         int64
	}{
		{0, 0, 32 << 20, 100, 100},         // no collection yet
		{16 << 20, 0, 32 << 20, 100, 100},  // the default already reaches the floor
		{31 << 20, 0, 32 << 20, 100, 100},  // 31 MiB × 2 ≥ 32 MiB already
		{32 << 20, 0, 32 << 20, 100, 100},  // exactly the floor
		{64 << 20, 0, 32 << 20, 100, 100},  // above the floor
		{2 << 20, 0, 32 << 20, 2000, 2000}, // never below the starting GOGC
		// The goal from the live heap: 5 MiB × 6.4 = 32 MiB.
		{5 << 20, 0, 32 << 20, 100, 540},
		{10 << 20, 0, 32 << 20, 50, 220}, // 10 MiB × 3.2
		{20 << 20, 0, 32 << 20, 10, 60},  // 20 MiB × 1.6
		{32<<20 - 1, 0, 32 << 20, 0, 1},  // one byte short, rounded up
		// Stacks and globals count: 2 MiB + (2 + 2) MiB × 7.5 = 32 MiB.
		{2 << 20, 2 << 20, 32 << 20, 100, 750},
		{1 << 20, 3 << 20, 32 << 20, 100, 775},  // 1 + 4 × 7.75
		{16 << 20, 1 << 20, 32 << 20, 100, 100}, // 16 + 17 MiB ≥ 32 MiB
		// Small live heaps: the runtime's minimum goal, 4 MiB × GOGC/100,
		// reaches 32 MiB at GOGC=800 first.
		{1, 0, 32 << 20, 100, 800},
		{100 << 10, 0, 32 << 20, 100, 800},
		{1 << 20, 0, 32 << 20, 100, 800},
		{2 << 20, 0, 32 << 20, 100, 800},
		{3 << 20, 0, 32 << 20, 100, 800},
		{1 << 20, 0, 5 << 20, 100, 125}, // 4 MiB × 1.25 = 5 MiB
	} {
		got := gcPercentFor(c.live, c.roots, c.floor, c.base)
		if got != c.want {
			t.Errorf("gcPercentFor(%d, %d, %d, %d) = %d, want %d", c.live, c.roots, c.floor, c.base, got, c.want)
		}
		goal := max(c.live+(c.live+c.roots)*uint64(got)/100, runtimeHeapMinimum*uint64(got)/100)
		if c.live > 0 && goal < c.floor {
			t.Errorf("gcPercentFor(%d, %d, %d, %d) = %d: goal %d is below the floor", c.live, c.roots, c.floor, c.base, got, goal)
		}
	}
}
