package segment

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// BenchmarkMarksStore: the cost of the durable mark of one segment load
// with N tags already marked, as 32 concurrent loads store the marks of
// distinct tags (the first use of many tags). log is [LogMarks] (append and
// fsync, group commit), file the [FileMarks] JSON file it replaces (whole
// file rewritten per group). Real files in the test's temporary directory,
// real fsyncs. Compare loads/s across N within one run:
//
//	go test -run '^$' -bench BenchmarkMarksStore -benchtime 3s ./segment/
func BenchmarkMarksStore(b *testing.B) {
	for _, kind := range []string{"log", "file"} {
		for _, n := range []int{1000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/tags=%d", kind, n), func(b *testing.B) {
				ctx := context.Background()
				dir := b.TempDir()
				seed := make(map[string]int64, n)
				for i := range n {
					seed[fmt.Sprintf("tag-%06d", i)] = 1000
				}
				var m Marks
				if kind == "log" {
					m = NewLogMarks(filepath.Join(dir, "segment-marks.log"), "", nil)
				} else {
					m = NewFileMarks(filepath.Join(dir, "segment-marks.json"))
				}
				if _, err := m.Load(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.StoreAll(ctx, seed); err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				b.SetParallelism(16) // 32 goroutines on 2 cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := next.Add(1)
						tag := fmt.Sprintf("tag-%06d", i%int64(n))
						if err := m.Store(ctx, tag, 1000+i); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
			})
		}
	}
}
