package snowflake_test

import (
	"testing"

	"github.com/sony/sonyflake"
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
