package main

import (
	"container/heap"
	"math"
	"slices"
	"strconv"
	"time"
)

// summarise merges the workers' observations; each worker's ids must be
// sorted.
func summarise(c benchConfig, target string, elapsed time.Duration, interrupted bool, workers []*benchWorker) *benchResult {
	r := &benchResult{
		URL: target, Mode: c.mode, Concurrency: c.concurrency, Batch: c.perRequest(),
		Elapsed: elapsed, Interrupted: interrupted,
		Errors: map[string]int64{}, ErrorExamples: map[string]string{},
		DuplicateIDs: []string{},
	}
	var nLat int
	for _, w := range workers {
		nLat += len(w.lat)
	}
	lat := make([]time.Duration, 0, nLat)
	runs := make([][]int64, 0, len(workers))
	for _, w := range workers {
		r.OK += w.ok
		r.Failed += w.failed
		r.IDs += int64(len(w.ids))
		lat = append(lat, w.lat...)
		runs = append(runs, w.ids)
		for k, n := range w.errs {
			if r.Errors[k] == 0 {
				r.ErrorExamples[k] = w.examples[k]
			}
			r.Errors[k] += n
		}
		w.lat, w.ids = nil, nil
	}
	r.Requests = r.OK + r.Failed
	if s := elapsed.Seconds(); s > 0 {
		r.RequestsPerS = float64(r.Requests) / s
		r.IDsPerS = float64(r.IDs) / s
	}
	slices.Sort(lat)
	r.Latency = latencies{
		P50: percentile(lat, 0.50), P90: percentile(lat, 0.90), P99: percentile(lat, 0.99),
		P999: percentile(lat, 0.999), Max: percentile(lat, 1),
	}
	r.Duplicates, r.DuplicateIDs = duplicates(runs, 10)
	return r
}

// duplicates merges sorted runs of IDs and returns how many IDs repeat one
// seen before (an ID seen three times counts twice) and up to limit distinct
// examples. It uses no memory beyond a heap of the runs.
func duplicates(runs [][]int64, limit int) (int64, []string) {
	h := make(runHeap, 0, len(runs))
	for _, run := range runs {
		if len(run) > 0 {
			h = append(h, run)
		}
	}
	heap.Init(&h)
	var (
		n        int64
		examples = []string{}
		last     int64
		seen     bool // last is set
		noted    bool // last is among the examples
	)
	for len(h) > 0 {
		run := h[0]
		id := run[0]
		switch {
		case seen && id == last:
			n++
			if !noted && len(examples) < limit {
				examples = append(examples, strconv.FormatInt(id, 10))
				noted = true
			}
		default:
			last, seen, noted = id, true, false
		}
		if len(run) == 1 {
			heap.Pop(&h)
		} else {
			h[0] = run[1:]
			heap.Fix(&h, 0)
		}
	}
	return n, examples
}

// runHeap is a min-heap of non-empty sorted runs by their first ID.
type runHeap [][]int64

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i][0] < h[j][0] }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.([]int64)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// percentile returns the nearest-rank q-quantile of sorted (0 when empty).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
