package segment_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// The Get benchmarks sit next to a bare atomic add, the floor of any shared
// counter, so that their ratio can be read from one run:
//
//	go test -run '^$' -bench . -benchmem ./segment/
//
// The tag's step is the largest the step column holds, so loads are rare
// (the first prefetch comes after 10% of 2^31 IDs).
//
// Besides ns/op (wall time) each reports cpu-ns/op: the CPU time of the
// whole process during the loop, divided by the iterations. On a machine
// shared with other work the wall time also counts the time the benchmark
// waited for a core; the CPU time does not, so its ratios move less.

// cpuMeter measures cpu-ns/op from its start to report.
type cpuMeter time.Duration

func startCPU() cpuMeter { return cpuMeter(processCPU()) }

// report adds the cpu-ns/op metric, once the loop has set b.N.
func (c cpuMeter) report(b *testing.B) {
	if d := processCPU() - time.Duration(c); d > 0 && c > 0 && b.N > 0 {
		b.ReportMetric(float64(d)/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkAtomicAdd(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			n.Add(1)
		}
		cpu.report(b)
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		cpu := startCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
		cpu.report(b)
	})
}

// BenchmarkMapAtomicAdd is the floor of any counter chosen by a string key:
// a lock-free map lookup (copy-on-write map behind an atomic pointer, as the
// generator's cache) plus the atomic add.
func BenchmarkMapAtomicAdd(b *testing.B) {
	type counter struct{ n atomic.Int64 }
	m := map[string]*counter{"bench": {}, "other": {}}
	var p atomic.Pointer[map[string]*counter]
	p.Store(&m)
	tag := "bench"
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			(*p.Load())[tag].n.Add(1)
		}
		cpu.report(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				(*p.Load())[tag].n.Add(1)
			}
		})
		cpu.report(b)
	})
}

func BenchmarkGet(b *testing.B) {
	db := openDB(b, sqliteDB.dsn(b))
	db.Create(b, "bench", 1, store.MaxStep)
	g := newGen(b, db.Store, segment.Config{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	mustGet(b, g, "bench")
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if _, err := g.Get(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.Get(ctx, "bench"); err != nil {
					b.Error(err)
					return
				}
			}
		})
		cpu.report(b)
	})
}

// BenchmarkTagGet is Get through a Tag handle: the same fast path as
// BenchmarkGet without the map lookup.
func BenchmarkTagGet(b *testing.B) {
	db := openDB(b, sqliteDB.dsn(b))
	db.Create(b, "bench", 1, store.MaxStep)
	g := newGen(b, db.Store, segment.Config{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	tag, err := g.Tag(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tag.Get(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if _, err := tag.Get(ctx); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := tag.Get(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		cpu.report(b)
	})
}
