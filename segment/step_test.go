package segment

import (
	"testing"
	"time"
)

// TestNextStep is Leaf's dynamic-step rule at the edges of its windows
// (15 and 30 minutes by default), the MaxStep cap and the DB-step floor.
func TestNextStep(t *testing.T) {
	cfg, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	const (
		grow   = DefaultGrowWindow
		shrink = DefaultShrinkWindow
	)
	tests := []struct {
		name          string
		first         bool
		prev, minStep int64
		give          time.Duration // time since the last prefetch
		want          int64
	}{
		{"first load takes the row's step", true, 0, 0, 0, 0},
		{"first prefetch takes the row's step", true, 2000, 2000, time.Minute, 0},
		{"no time at all doubles", false, 2000, 2000, 0, 4000},
		{"just under the grow window doubles", false, 2000, 2000, grow - time.Nanosecond, 4000},
		{"at the grow window keeps", false, 4000, 2000, grow, 4000},
		{"just over the grow window keeps", false, 4000, 2000, grow + time.Nanosecond, 4000},
		{"just under the shrink window keeps", false, 4000, 2000, shrink - time.Nanosecond, 4000},
		{"at the shrink window halves", false, 4000, 2000, shrink, 2000},
		{"just over the shrink window halves", false, 4000, 2000, shrink + time.Nanosecond, 2000},
		{"an hour later halves once", false, 8000, 2000, time.Hour, 4000},
		{"doubles up to MaxStep", false, 500_000, 2000, time.Minute, 1_000_000},
		{"does not double past MaxStep", false, 500_001, 2000, time.Minute, 500_001},
		{"at MaxStep stays", false, 1_000_000, 2000, time.Minute, 1_000_000},
		{"does not halve below the DB step", false, 3000, 2000, shrink, 3000},
		{"halves exactly to the DB step", false, 4000, 2000, shrink, 2000},
		{"at the DB step stays", false, 2000, 2000, time.Hour, 2000},
		{"raised DB step lifts a kept step", false, 1000, 5000, 20 * time.Minute, 5000},
		{"raised DB step lifts a doubled step", false, 1000, 5000, time.Minute, 5000},
		{"at least 1 without a DB step", false, 1, 0, time.Hour, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextStep(tt.first, tt.prev, tt.minStep, tt.give, cfg); got != tt.want {
				t.Errorf("nextStep(%v, %d, %d, %v) = %d, want %d", tt.first, tt.prev, tt.minStep, tt.give, got, tt.want)
			}
		})
	}
	// The windows and the cap come from Config.
	custom := cfg
	custom.GrowWindow, custom.ShrinkWindow, custom.MaxStep = time.Minute, 2*time.Minute, 100
	for _, tt := range []struct {
		prev int64
		give time.Duration
		want int64
	}{
		{40, 59 * time.Second, 80},
		{60, 59 * time.Second, 60},
		{40, time.Minute, 40},
		{40, 2 * time.Minute, 20},
	} {
		if got := nextStep(false, tt.prev, 10, tt.give, custom); got != tt.want {
			t.Errorf("nextStep(false, %d, 10, %v) with windows 1m/2m and MaxStep 100 = %d, want %d", tt.prev, tt.give, got, tt.want)
		}
	}
}
