package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake/lease"
)

// BenchmarkExpiry: Session.Expiry, which the generator calls on every ID (two clock reads:
// time.Now and the boot clock), against a bare time.Now, the floor of any lease check.
func BenchmarkExpiry(b *testing.B) {
	s, err := lease.Start(lease.Config{Policy: lease.Policy{TTL: time.Hour, Renew: time.Minute, Margin: time.Second},
		Renew: func(context.Context) (time.Duration, error) { return 0, nil }}, lease.Read(lease.SystemClock{}), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	var sink time.Time
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink = time.Now()
		}
	})
	b.Run("Session.Expiry", func(b *testing.B) {
		for b.Loop() {
			sink = s.Expiry()
		}
	})
	_ = sink
}
