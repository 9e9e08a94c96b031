package snowflake_test

import (
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
)

// reportRate reports IDs/ms and the share of the default layout's cap of
// 4096 IDs per millisecond (%cap). A copy of snowflake/bench_test.go's, so
// that the IDs/ms of the leaf-go and the baseline benchmarks mean the same.
func reportRate(b *testing.B) {
	b.Helper()
	if b.N > 0 && b.Elapsed() > 0 {
		perMs := float64(b.N) / (float64(b.Elapsed()) / float64(time.Millisecond))
		b.ReportMetric(perMs, "IDs/ms")
		b.ReportMetric(perMs/4096*100, "%cap")
	}
}

// BenchmarkBwmarrin is the baseline: github.com/bwmarrin/snowflake's Node.Generate (same
// 41/10/12 layout, sequence from 0, spins for the next millisecond, mutex).
func BenchmarkBwmarrin(b *testing.B) {
	node, err := bwsnowflake.NewNode(1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = node.Generate()
	}
	reportRate(b)
}

func BenchmarkBwmarrinParallel(b *testing.B) {
	node, err := bwsnowflake.NewNode(1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = node.Generate()
		}
	})
	reportRate(b)
}
