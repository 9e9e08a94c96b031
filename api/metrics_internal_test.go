package api

import (
	"math"
	"testing"
	"time"

	"github.com/leaf-go/leaf/segment"
)

func TestLeafCode(t *testing.T) {
	tests := []struct {
		give   string
		want   int64
		wantOK bool
	}{
		{`{"timestamp":1,"status":500,"message":"Result{id=-2, status=EXCEPTION}","path":"/x"}`, -2, true},
		{`"message":"Result{id=-1, status=EXCEPTION}"`, -1, true},
		{`"message":"Result{id=-3, status=EXCEPTION}"`, -3, true},
		{`"message":"Result{id=-4, status=EXCEPTION}"`, 0, false},
		{`"message":"Result{id=7, status=SUCCESS}"`, 0, false},
		{`"message":"Result{id=-2"`, 0, false},
		{`"message":"Result{id=x, status=EXCEPTION}"`, 0, false},
		{`panic: runtime error`, 0, false},
		{``, 0, false},
	}
	for _, tt := range tests {
		got, ok := leafCode([]byte(tt.give))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("leafCode(%q) = %d, %v, want %d, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}

func FuzzLeafCode(f *testing.F) {
	for _, s := range []string{`Result{id=-2, status=EXCEPTION}`, `Result{id=-9999999999999999999,`, `Result{id=`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, ok := leafCode(b); ok && (c < -3 || c > -1) {
			t.Errorf("leafCode(%q) = %d, true, want a code in -3..-1", b, c)
		}
	})
}

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
		got := h.add(t0.Add(tt.at), st(tt.issued, tt.step))
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
