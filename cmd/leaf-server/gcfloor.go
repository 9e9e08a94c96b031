package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// gcHeapFloor is the least heap goal leaf-server keeps (see gcFloor), in
// bytes: 32 MiB.
//
// Why: a segment request allocates about 3 KiB, nearly all of it in
// net/http, so at tens of thousands of requests per second the collector
// runs often, and with Go's default (GOGC=100, a 4 MiB minimum goal) and
// leaf-server's live heap of 1 to 3 MiB it ran every 500 or so requests and
// took about 10% of the server's CPU under wrk (BENCHMARKS.md, "HTTP single
// ID under wrk"). With a 32 MiB goal it runs about twenty times less often
// for the same marking work per cycle. The cost is memory: up to 32 MiB of
// heap more than the default while the live heap is small, nothing once it
// is over 16 MiB (the goal is then the default's).
const gcHeapFloor = 32 << 20

// gcFloor keeps the collector's heap goal at least floor bytes: after every
// collection it sets GOGC (debug.SetGCPercent) so that the goal the
// runtime derives from the live heap reaches floor (gcPercentFor), and never
// below the GOGC the process started with. It does nothing (and stop does nothing) when getenv("GOGC")
// is set, so an operator's GOGC is taken as given, or when the collector is
// off. GOMEMLIMIT still applies: the runtime collects when the limit is
// near, whatever the goal. stop restores the starting GOGC and ends the
// tuning; it is safe to call more than once.
//
// GOGC is one setting per process, so one gcFloor tunes it at a time: a
// call while another's tuning runs (run called twice in one test process)
// does nothing.
//
// The tuning runs on the runtime's cleanup goroutine, from a cleanup
// attached to an object that each collection frees (runtime.AddCleanup):
// no goroutine of its own.
func gcFloor(floor uint64, getenv func(string) string) (stop func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	if !gcFloorActive.CompareAndSwap(false, true) {
		return func() {}
	}
	base := readGCPercent()
	if base <= 0 {
		gcFloorActive.Store(false)
		return func() {}
	}
	t := &gcTuner{floor: floor, base: base, set: base}
	t.arm()
	return t.stop
}

// gcFloorActive is true while a gcFloor tunes GOGC.
var gcFloorActive atomic.Bool

// gcTuner is gcFloor's state.
type gcTuner struct {
	floor uint64
	base  int64 // GOGC at the start, in percent (> 0)

	mu      sync.Mutex // guards set, stopped
	set     int64      // GOGC last set, in percent
	stopped bool
}

// gcSentinel is the object whose collection triggers gcTuner.tune. It holds
// a pointer so that it is never one of the tiny allocations that share a
// block (whose cleanups may never run).
type gcSentinel struct {
	_ *gcTuner
	_ [8]byte
}

// arm attaches the next tuning to a fresh object that the next collection
// frees.
func (t *gcTuner) arm() {
	runtime.AddCleanup(new(gcSentinel), func(t *gcTuner) { t.tune() }, t)
}

// tune sets GOGC for the live heap the last collection left, then re-arms.
func (t *gcTuner) tune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	live, roots := liveHeap()
	want := gcPercentFor(live, roots, t.floor, t.base)
	if want != t.set {
		debug.SetGCPercent(int(want))
		t.set = want
	}
	t.arm()
}

func (t *gcTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	if t.set != t.base {
		debug.SetGCPercent(int(t.base))
	}
	gcFloorActive.Store(false)
}

// runtimeHeapMinimum is the Go runtime's least heap goal at GOGC=100, in
// bytes (runtime.defaultHeapMinimum, 4 MiB since Go 1.5); the runtime scales
// it with GOGC.
const runtimeHeapMinimum = 4 << 20

// gcPercentFor is the least GOGC (percent), and at least base, that makes
// the runtime's heap goal at least floor bytes. That goal is the larger of
// live + (live + roots) × GOGC/100 and runtimeHeapMinimum × GOGC/100, where
// live is the heap the last collection marked and roots the stacks and
// globals it scanned (GOGC applies to those too since Go 1.18), all in
// bytes. A live heap of 0 (no collection yet) gives base.
func gcPercentFor(live, roots, floor uint64, base int64) int64 {
	if live == 0 || live >= floor {
		return base
	}
	// Both round up, so that the goal is not a few bytes short of floor.
	scan := live + roots
	byLive := int64(((floor-live)*100 + scan - 1) / scan)
	byMinimum := int64((floor*100 + runtimeHeapMinimum - 1) / runtimeHeapMinimum)
	return max(min(byLive, byMinimum), base)
}

// readGCPercent is the current GOGC in percent (0 or less when off),
// read without changing it.
func readGCPercent() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	return int64(s[0].Value.Uint64())
}

// liveHeap is the heap the last collection marked live, and the stacks and
// globals it scanned, in bytes (0 before the first collection).
func liveHeap() (live, roots uint64) {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}
	metrics.Read(s)
	var v [3]uint64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	return v[0], v[1] + v[2]
}
