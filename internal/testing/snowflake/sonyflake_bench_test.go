package snowflake_test

import (
	"testing"
	"time"

	"github.com/sony/sonyflake"
	sonyflakev2 "github.com/sony/sonyflake/v2"
)

// sonyflakeCapPerMs is sonyflake's own cap: 2^8 IDs per 10 ms time unit and
// machine, 25.6 IDs per millisecond, 160 times fewer than the 41/10/12 layout.
const sonyflakeCapPerMs = 256.0 / 10

// BenchmarkSonyflake is the second baseline: github.com/sony/sonyflake's
// NextID (39-bit time in 10 ms units, 8-bit sequence, 16-bit machine ID,
// mutex, sleeps to the next time unit when the sequence wraps). It is bound
// by its layout's cap, so %cap is against 25.6 IDs/ms, not 4096.
func BenchmarkSonyflake(b *testing.B) {
	sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sf.NextID(); err != nil {
			b.Fatal(err)
		}
	}
	if b.Elapsed() > 0 {
		perMs := float64(b.N) / (float64(b.Elapsed().Nanoseconds()) / 1e6)
		b.ReportMetric(perMs, "IDs/ms")
		b.ReportMetric(perMs/sonyflakeCapPerMs*100, "%cap")
	}
}

// reportRateCap reports IDs/ms and the share of capPerMs, the generator's
// own cap in IDs per millisecond (%cap).
func reportRateCap(b *testing.B, capPerMs float64) {
	b.Helper()
	if b.N > 0 && b.Elapsed() > 0 {
		perMs := float64(b.N) / (float64(b.Elapsed()) / float64(time.Millisecond))
		b.ReportMetric(perMs, "IDs/ms")
		b.ReportMetric(perMs/capPerMs*100, "%cap")
	}
}

// newSonyflakeV2 returns a github.com/sony/sonyflake/v2 generator for
// machine 1 with st's layout (zero fields: v2's defaults).
func newSonyflakeV2(b *testing.B, st sonyflakev2.Settings) *sonyflakev2.Sonyflake {
	b.Helper()
	st.MachineID = func() (int, error) { return 1, nil }
	sf, err := sonyflakev2.New(st)
	if err != nil {
		b.Fatal(err)
	}
	return sf
}

// layout41 is the default leaf-go and Twitter layout in sonyflake v2's
// settings: 1 ms time unit, 10-bit machine ID, 12-bit sequence, which leaves
// 41 bits of time. Its cap is 4096 IDs per millisecond, as leaf-go's Next
// and bwmarrin/snowflake have.
var layout41 = sonyflakev2.Settings{TimeUnit: time.Millisecond, BitsMachineID: 10, BitsSequence: 12}

// BenchmarkSonyflakeV2 is github.com/sony/sonyflake/v2's NextID with v2's
// default layout, the same as v1's (39-bit time in 10 ms units, 8-bit
// sequence, 16-bit machine ID): %cap is against 25.6 IDs/ms.
func BenchmarkSonyflakeV2(b *testing.B) {
	sf := newSonyflakeV2(b, sonyflakev2.Settings{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sf.NextID(); err != nil {
			b.Fatal(err)
		}
	}
	reportRateCap(b, sonyflakeCapPerMs)
}

// BenchmarkSonyflakeV2Layout41 is sonyflake v2's NextID set to the 41/10/12
// layout (layout41): the same cap as leaf-go's Next with ZeroStart and
// BenchmarkBwmarrin (4096 IDs/ms, sequence from 0), so the three compare
// like for like. Like v1, v2 takes a mutex and sleeps to the next time unit
// when the sequence wraps.
func BenchmarkSonyflakeV2Layout41(b *testing.B) {
	sf := newSonyflakeV2(b, layout41)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sf.NextID(); err != nil {
			b.Fatal(err)
		}
	}
	reportRateCap(b, 4096)
}

// BenchmarkSonyflakeV2Layout41Parallel is BenchmarkSonyflakeV2Layout41 with
// GOMAXPROCS goroutines, beside BenchmarkBwmarrinParallel.
func BenchmarkSonyflakeV2Layout41Parallel(b *testing.B) {
	sf := newSonyflakeV2(b, layout41)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := sf.NextID(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRateCap(b, 4096)
}
