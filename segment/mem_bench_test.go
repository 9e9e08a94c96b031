package segment

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/leaf-go/leaf/store"
)

// BenchmarkTagMemory measures the heap a Generator holds per tag (issue 13:
// at most 2 KiB per warm tag at 100,000 tags):
//
//	go test -run '^$' -bench BenchmarkTagMemory -benchtime 1x ./segment/
//
// A Generator over memStore (leaf_alloc in memory, DB step 10; Rows returns
// fresh strings, as a database driver does) with the server's marks store
// ([LogMarks] in a temporary directory) gets every tag warmed by one Get
// from 64 goroutines; then every tag is made busy: 25 more Gets, so that it
// has switched segments at least once and holds a current and usually a
// prefetched next segment. Heap is runtime.MemStats.HeapAlloc after two
// GCs, with the store already filled; each figure is the growth since
// before [New] divided by the tags:
//
//   - B/cached-tag: after New (one buffer per row, the cache map, the marks
//     read at start);
//   - B/warm-tag: after the one Get per tag (plus a current segment and a
//     high-water mark in two maps, the generator's and the marks store's);
//   - B/busy-tag: after the 25 more Gets.
//
// What the server adds per tag on top (HTTP state, metrics) is not here;
// the harness's "tags" section measures the whole server's RSS.
// docs/architecture.md ("Memory per tag") explains the figures.
func BenchmarkTagMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("tags=%d", n), func(b *testing.B) {
			for b.Loop() {
				tagMemory(b, n)
			}
		})
	}
	b.Logf("unsafe.Sizeof: buffer %d B, segment %d B, Tag %d B",
		unsafe.Sizeof(buffer{}), unsafe.Sizeof(segment{}), unsafe.Sizeof(Tag{}))
}

func tagMemory(b *testing.B, n int) {
	ctx := context.Background()
	st := newMemStore(n, 10)
	tags := make([]string, n)
	for i := range tags {
		tags[i] = memTag(i)
	}
	marks := NewLogMarks(filepath.Join(b.TempDir(), "marks.log"), "", slog.New(slog.DiscardHandler))
	before := heapAlloc()
	// Long timeouts: on a loaded machine a load (an fsync of the marks log)
	// can take more than the default second, and this measures memory.
	g, err := New(ctx, st, Config{Marks: marks, Logger: slog.New(slog.DiscardHandler),
		WaitTimeout: time.Minute, LoadTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	cached := heapAlloc()
	each := func(gets int) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
					for range gets {
						if _, err := g.Get(ctx, tags[i]); err != nil {
							b.Errorf("Get(%q) = %v", tags[i], err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		// Let the prefetches end, so that what is measured is what stays.
		for loading := true; loading; {
			loading = false
			for _, s := range g.Stats() {
				if s.Loading {
					loading = true
					runtime.Gosched()
					break
				}
			}
		}
	}
	each(1)
	warm := heapAlloc()
	each(25)
	busy := heapAlloc()
	runtime.KeepAlive(g)
	runtime.KeepAlive(tags)
	per := func(h uint64) float64 { return (float64(h) - float64(before)) / float64(n) }
	b.ReportMetric(per(cached), "B/cached-tag")
	b.ReportMetric(per(warm), "B/warm-tag")
	b.ReportMetric(per(busy), "B/busy-tag")
}

func memTag(i int) string { return fmt.Sprintf("tag-%06d", i+1) }

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// memStore is leaf_alloc in memory for BenchmarkTagMemory: n rows tag-000001
// and on, max_id 1, the given step.
type memStore struct {
	mu   sync.Mutex
	rows map[string]*store.Row
}

func newMemStore(n int, step int64) *memStore {
	m := &memStore{rows: make(map[string]*store.Row, n)}
	for i := range n {
		t := memTag(i)
		m.rows[t] = &store.Row{BizTag: t, MaxID: 1, Step: step}
	}
	return m
}

func (m *memStore) Allocate(_ context.Context, tag string, step, mark int64) (store.Allocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rows[tag]
	if r == nil {
		return store.Allocation{}, store.ErrTagNotFound
	}
	if r.MaxID < store.GuardMark(mark) {
		return store.Allocation{}, store.ErrBelowMark
	}
	if step <= 0 {
		step = r.Step
	}
	r.MaxID += step
	return store.Allocation{BizTag: tag, MaxID: r.MaxID, Step: step, DBStep: r.Step}, nil
}

// Rows returns copies of the tags, as a driver returns new strings.
func (m *memStore) Rows(context.Context) ([]store.Row, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.Row, 0, len(m.rows))
	for _, r := range m.rows {
		c := *r
		c.BizTag = strings.Clone(r.BizTag)
		out = append(out, c)
	}
	return out, nil
}

func (m *memStore) FindTags(_ context.Context, tags []string) (map[string]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for _, t := range tags {
		if m.rows[t] != nil {
			out[strings.Clone(t)] = false
		}
	}
	return out, nil
}

func (m *memStore) MaxID(_ context.Context, tag string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rows[tag]; r != nil {
		return r.MaxID, nil
	}
	return 0, store.ErrTagNotFound
}
