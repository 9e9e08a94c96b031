package api

import (
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/leaf-go/leaf/segment"
)

func TestTagHistoryRate(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	st := func(issued, step int64) segment.BufferStats {
		return segment.BufferStats{BizTag: "a", InitOK: true, Issued: issued, Step: step, LastLoad: t0}
	}
	tests := []struct {
		name   string
		at     time.Duration
		issued int64
		step   int64
		want   float64
	}{
		{"first sample: no rate yet", 0, 0, 100, 0},
		{"too close to the first: not kept", 100 * time.Millisecond, 50, 100, 500},
		{"one second, 1000 IDs", time.Second, 1000, 100, 1000},
		{"steady", 5 * time.Second, 5000, 200, 1000},
		// The base is the newest sample at least a window old (1 s).
		{"window slides: the 0 s sample is dropped", 12 * time.Second, 5000, 200, 4000.0 / 11},
		{"idle long enough: rate falls to 0", 30 * time.Second, 5000, 200, 0},
		{"buffer re-created: history restarts", 31 * time.Second, 10, 200, 0},
		{"after restart", 33 * time.Second, 210, 400, 100},
	}
	h := &tagHistory{}
	for _, tt := range tests {
		s := st(tt.issued, tt.step)
		got := h.add(t0.Add(tt.at), &s)
		if math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: rate = %v, want %v (samples %v)", tt.name, got, tt.want, h.samples)
		}
	}
	var steps []int64
	for _, s := range h.steps {
		steps = append(steps, s.step)
	}
	if want := []int64{100, 200, 400}; !equalInts(steps, want) {
		t.Errorf("step history = %v, want %v", steps, want)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// wrapped is a middleware's writer that wraps another and unwraps to it.
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestRecordLeafCodeReachesStatusWriter(t *testing.T) {
	tests := []struct {
		name string
		give func(sw *statusWriter) http.ResponseWriter
	}{
		{"the metrics writer itself", func(sw *statusWriter) http.ResponseWriter { return sw }},
		{"wrapped once", func(sw *statusWriter) http.ResponseWriter { return wrapped{sw} }},
		{"wrapped twice", func(sw *statusWriter) http.ResponseWriter { return wrapped{wrapped{sw}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sw := &statusWriter{ResponseWriter: httptest.NewRecorder()}
			recordLeafCode(tt.give(sw), -2)
			if sw.leafCode != -2 {
				t.Errorf("recordLeafCode(w, -2): statusWriter.leafCode = %d, want -2", sw.leafCode)
			}
		})
	}
	// Without the middleware there is nothing to record on.
	recordLeafCode(httptest.NewRecorder(), -2)
	recordLeafCode(wrapped{httptest.NewRecorder()}, -2)
}

func TestMatchTag(t *testing.T) {
	tests := []struct {
		patterns []string
		tag      string
		want     bool
	}{
		{[]string{"order-*"}, "order-eu", true},
		{[]string{"order-*"}, "order-eu/1", true}, // a prefix crosses "/"
		{[]string{"order-*"}, "orders", false},
		{[]string{"*"}, "a/b", true},       // every tag
		{[]string{"x/*y"}, "x/a/y", false}, // a glob's * does not cross "/"
		{[]string{"x/*y"}, "x/ay", true},
		{[]string{"pay-?"}, "pay-1", true},
		{[]string{"pay-?"}, "pay-10", false},
		{[]string{"[ab]-*x"}, "b-1x", true},
		{[]string{"x", "y*"}, "yes", true},
		{nil, "any", false},
	}
	for _, tt := range tests {
		if got := matchTag(tt.patterns, tt.tag); got != tt.want {
			t.Errorf("matchTag(%q, %q) = %v, want %v", tt.patterns, tt.tag, got, tt.want)
		}
	}
	if _, err := ParseTagPatterns("ok*,[x"); err == nil {
		t.Error(`ParseTagPatterns("ok*,[x") = nil error, want one for "[x"`)
	}
}

// smallest returns the indices of the k served views with a rate above 0
// that sort first by before, in that order, by way of topK.
func smallest(views []bufferView, k int, before func(a, b int) bool) []int {
	top := newTopK(k, func(a, b *int) bool { return before(*a, *b) })
	for i := range views {
		if v := &views[i]; competes(v.InitOK, v.Rate, v.Runway) {
			top.push(&i)
		}
	}
	return top.sorted()
}

// TestSmallest: the heap selection returns the same k as a full sort, and
// leaves out tags that do not consume IDs.
func TestSmallest(t *testing.T) {
	views := make([]bufferView, 1000)
	for i := range views {
		views[i] = bufferView{BufferStats: &segment.BufferStats{BizTag: strconv.Itoa(i), InitOK: i%10 != 3},
			Rate: float64((i * 7919) % 101), Runway: float64((i * 104729) % 997)}
	}
	before := func(a, b int) bool {
		if views[a].Runway != views[b].Runway {
			return views[a].Runway < views[b].Runway
		}
		return views[a].BizTag < views[b].BizTag
	}
	var want []int
	for i, v := range views {
		if v.InitOK && v.Rate > 0 {
			want = append(want, i)
		}
	}
	slices.SortFunc(want, func(a, b int) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	for _, k := range []int{0, 1, 7, 100, len(want), len(want) + 5} {
		if got := smallest(views, k, before); !slices.Equal(got, want[:min(k, len(want))]) {
			t.Errorf("smallest(k=%d) = %v…, want %v…", k, got[:min(5, len(got))], want[:min(5, k)])
		}
	}
}
