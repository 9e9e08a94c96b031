package snowflake_test

import (
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

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
