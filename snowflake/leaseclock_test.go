package snowflake_test

import (
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

// TestLeaseDeadlineSuspend: a host suspended for a minute in the middle of a 10 s lease. The
// monotonic clock (what time.Now's readings compare on) has not moved; the boot clock and the
// wall clock have. The lease is over.
func TestLeaseDeadlineSuspend(t *testing.T) {
	wall := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	boot := 100 * time.Hour
	d := snowflake.NewLeaseDeadline(wall, boot, 10*time.Second)
	tests := []struct {
		name     string
		wall     time.Time
		boot     time.Duration
		wantLeft time.Duration
	}{
		{name: "renewed just now", wall: wall, boot: boot, wantLeft: 10 * time.Second},
		{name: "4 s later", wall: wall.Add(4 * time.Second), boot: boot + 4*time.Second, wantLeft: 6 * time.Second},
		{name: "suspended 60 s", wall: wall.Add(64 * time.Second), boot: boot + 64*time.Second, wantLeft: -54 * time.Second},
		{name: "suspended, wall clock not yet resynced", wall: wall.Add(4 * time.Second), boot: boot + 64*time.Second, wantLeft: -54 * time.Second},
		{name: "wall clock stepped back 1 h", wall: wall.Add(-time.Hour), boot: boot + 4*time.Second, wantLeft: 6 * time.Second},
		{name: "wall clock stepped ahead 1 h", wall: wall.Add(time.Hour), boot: boot + 4*time.Second, wantLeft: 10*time.Second - time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.Remaining(tt.wall, tt.boot); got != tt.wantLeft {
				t.Errorf("Remaining(%v, %v) = %v, want %v", tt.wall, tt.boot, got, tt.wantLeft)
			}
			exp := d.Expiry(tt.wall, tt.boot)
			if got := snowflake.LeaseExpired(tt.wall, exp); got != (tt.wantLeft <= 0) {
				t.Errorf("LeaseExpired(now, Expiry()) = %v, want %v", got, tt.wantLeft <= 0)
			}
		})
	}
	var zero snowflake.LeaseDeadline
	if got := zero.Remaining(wall, boot); got > 0 {
		t.Errorf("zero LeaseDeadline Remaining = %v, want expired", got)
	}
}

// TestLeaseExpiredMonotonic: readings with Go's monotonic clock (time.Now) still expire on it;
// the zero expiry never does.
func TestLeaseExpiredMonotonic(t *testing.T) {
	now := time.Now()
	if snowflake.LeaseExpired(now, now.Add(time.Second)) {
		t.Error("LeaseExpired(now, now+1s) = true")
	}
	if !snowflake.LeaseExpired(now, now) || !snowflake.LeaseExpired(now.Add(time.Second), now) {
		t.Error("LeaseExpired at or after the expiry = false")
	}
	if snowflake.LeaseExpired(now, time.Time{}) {
		t.Error("LeaseExpired with the zero expiry = true")
	}
	// A wall-only reading (as after a resume, when only the wall clock shows the suspend)
	// past a monotonic expiry counts.
	if !snowflake.LeaseExpired(now.Add(time.Minute).Round(0), now.Add(10*time.Second)) {
		t.Error("LeaseExpired with the wall clock past the expiry = false")
	}
}

// TestBootClock: CLOCK_BOOTTIME is readable and does not run backwards.
func TestBootClock(t *testing.T) {
	a := snowflake.BootClock{}.Boot()
	time.Sleep(2 * time.Millisecond)
	b := snowflake.BootClock{}.Boot()
	if a <= 0 || b < a+2*time.Millisecond {
		t.Errorf("Boot() = %v then %v after 2 ms, want positive and advancing", a, b)
	}
}
