package etcdworker

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

// monoOnly is a Worker whose Expiry skips the wall-clock check: the baseline that shows what
// the suspend check (one time.Now per Next) costs on the generator's hot path.
type monoOnly struct{ *Worker }

func (m monoOnly) Expiry() time.Time { return m.dl.Load().mono }

// benchWorker is a Worker that needs no cluster: a deadline an hour away and a stored mark so
// high that Store never reaches etcd.
func benchWorker() *Worker {
	w := &Worker{
		opts:       Options{Clock: snowflake.SystemClock{}, Wall: func() time.Time { return time.Now().Round(0) }},
		workerID:   1,
		markMillis: math.MaxInt64,
		lost:       make(chan struct{}),
		writeSem:   make(chan struct{}, 1),
	}
	far := time.Now().Add(time.Hour)
	w.dl.Store(&deadline{mono: far, wall: far.Round(0)})
	return w
}

// BenchmarkNextExpiry: snowflake Next with the etcd Worker as its lease, with Expiry's wall
// check (mono+wall) and without it (mono-only, the baseline). Compare the two ns/op of one run.
func BenchmarkNextExpiry(b *testing.B) {
	for _, bc := range []struct {
		name string
		src  snowflake.Source
	}{{"mono-only", monoOnly{benchWorker()}}, {"mono+wall", benchWorker()}} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := snowflake.New(context.Background(), snowflake.Settings{Source: bc.src, ZeroStart: true})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				if _, err := g.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExpiry: Expiry alone, with the wall check (mono+wall) and without (mono-only, the
// baseline). BenchmarkNextExpiry is bound by the layout's 4,096 IDs per millisecond (at least
// 244 ns per ID) and hides the difference; this one shows it.
func BenchmarkExpiry(b *testing.B) {
	var sink time.Time
	for _, bc := range []struct {
		name string
		src  snowflake.Lease
	}{{"mono-only", monoOnly{benchWorker()}}, {"mono+wall", benchWorker()}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				sink = bc.src.Expiry()
			}
		})
	}
	_ = sink
}
