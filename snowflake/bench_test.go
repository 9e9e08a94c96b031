package snowflake_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

// capNsPerID is the layout's cap: 4096 IDs per millisecond and worker are 244 ns per ID. A
// benchmark of Next on the default layout cannot beat it, whatever the fast path costs.
const capNsPerID = float64(time.Millisecond) / 4096

func reportRate(b *testing.B) {
	b.Helper()
	if b.N > 0 && b.Elapsed() > 0 {
		perMs := float64(b.N) / (float64(b.Elapsed()) / float64(time.Millisecond))
		b.ReportMetric(perMs, "IDs/ms")
		b.ReportMetric(perMs/4096*100, "%cap")
	}
}

func benchmarkNext(b *testing.B, s snowflake.Settings) {
	g := newGenerator(b, s)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}

// BenchmarkNext: default layout and settings (random start), one caller: bounded by the cap.
func BenchmarkNext(b *testing.B) { benchmarkNext(b, snowflake.Settings{WorkerID: 1}) }

// BenchmarkNextZeroStart: sequence from 0, as Twitter and bwmarrin/snowflake do.
func BenchmarkNextZeroStart(b *testing.B) {
	benchmarkNext(b, snowflake.Settings{WorkerID: 1, ZeroStart: true})
}

// BenchmarkNextFileHighWater: with a FileHighWater (one fsync'd write per 3 s).
func BenchmarkNextFileHighWater(b *testing.B) {
	benchmarkNext(b, snowflake.Settings{WorkerID: 1, HighWater: snowflake.NewFileHighWater(b.TempDir() + "/hw")})
}

// BenchmarkNextUncapped: 22 sequence bits (4M IDs per ms), so the cost of the fast path itself
// shows instead of the layout's cap.
func BenchmarkNextUncapped(b *testing.B) {
	l := snowflake.DefaultLayout()
	l.TimeBits, l.WorkerBits, l.SequenceBits = 40, 1, 22
	benchmarkNext(b, snowflake.Settings{Layout: l, ZeroStart: true})
}

func BenchmarkNextParallel(b *testing.B) {
	g := newGenerator(b, snowflake.Settings{WorkerID: 1})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b)
}

// BenchmarkSystemClockNow is what one Next cost in reading the clock before AnchoredClock:
// time.Now reads the wall and the monotonic clock.
func BenchmarkSystemClockNow(b *testing.B) {
	c := snowflake.SystemClock{}
	b.ReportAllocs()
	var sink int64
	for b.Loop() {
		sink += c.Now().UnixMilli()
	}
	_ = sink
}

// BenchmarkAnchoredClockNow is the generator's default clock: one monotonic read between
// rechecks of the wall clock (every AnchorRecheck).
func BenchmarkAnchoredClockNow(b *testing.B) {
	c := snowflake.NewAnchoredClock()
	b.ReportAllocs()
	var sink int64
	for b.Loop() {
		sink += c.Now().UnixMilli()
	}
	_ = sink
}

// BenchmarkAtomicAdd is the floor for any in-process ID source: one atomic add.
func BenchmarkAtomicAdd(b *testing.B) {
	var n atomic.Int64
	b.ReportAllocs()
	for b.Loop() {
		n.Add(1)
	}
}

func BenchmarkCompose(b *testing.B) {
	l := snowflake.DefaultLayout()
	b.ReportAllocs()
	var sink int64
	for i := int64(0); b.Loop(); i++ {
		id, err := l.Compose(1_700_000_000_000+i>>12, 237, i&4095)
		if err != nil {
			b.Fatal(err)
		}
		sink += id
	}
	_ = sink
}

func BenchmarkDecompose(b *testing.B) {
	b.ReportAllocs()
	var sink int64
	for i := int64(0); b.Loop(); i++ {
		sink += snowflake.Decompose(1724551110457221119 + i).Millis
	}
	_ = sink
}

var _ = capNsPerID
