package client_test

import (
	"context"
	"sync"
	"testing"

	"github.com/leaf-go/leaf/client"
)

// BenchmarkSegment compares the ways to take a segment ID through a real
// leaf-server on loopback, callers in parallel: the buffered client (a
// mutex per tag and, rarely, a batch request) against single-ID mode (one
// request per ID, as against Java Leaf). The ratio is what batching buys.
func BenchmarkSegment(b *testing.B) {
	p := sqliteServer(b, map[string]int64{"bench": 10_000})
	for _, bb := range []struct {
		name string
		give client.Options
	}{
		{"batch1000", client.Options{}},
		{"single", client.Options{BatchSize: 1}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			c, err := client.New(p.base(), bb.give)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Segment(context.Background(), "bench"); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMutexBaseline is the floor of the buffered path: a slice popped
// under a mutex, no client around it.
func BenchmarkMutexBaseline(b *testing.B) {
	var (
		mu  sync.Mutex // guards pos
		pos int
		ids = make([]int64, 1000)
		sum int64
	)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			if pos == len(ids) {
				pos = 0
			}
			sum += ids[pos]
			pos++
			mu.Unlock()
		}
	})
}
