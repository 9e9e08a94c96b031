package sqllease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// The rest of snowflake.Source: what the status page, /readyz and /metrics read.

// Name returns "sql".
func (l *Lease) Name() string { return "sql" }

// Ready returns nil while the lease backs new IDs; otherwise why not: lost (for good: the
// error wraps lease.ErrLeaseLost; a new claim is needed), a claim without history still held
// back, or the local expiry passed (renewals failing, or closed); the generator refuses in
// each case. It reads the Lease's clock.
func (l *Lease) Ready() error {
	err := l.s.Ready()
	switch {
	case errors.Is(err, lease.ErrStopped):
		return fmt.Errorf("sql worker ID %d: %w", l.workerID, ErrClosed)
	case err != nil:
		return fmt.Errorf("sql worker ID %d: %w", l.workerID, err)
	}
	return nil
}

// LastHeartbeat returns the local instant before the last successful claim or renewal was
// sent (State().LastRenewal).
func (l *Lease) LastHeartbeat() time.Time { return l.s.Stats().LastRenewal }

// Details returns State() as the sourceState object of GET /api/v1/snowflake/status shows it:
// workerId, generation, owner, ttlMs, renewMs, marginMs, expires, heldUntil (a claim without
// history held back until then), lastRenewal, dbExpires,
// highWater (instants in RFC 3339, UTC, "" for none), renewals, renewFailures,
// consecutiveFailures, lastError, lost and closed.
func (l *Lease) Details() any {
	s := l.State()
	return map[string]any{
		"workerId": s.WorkerID, "generation": s.Generation, "owner": s.Owner,
		"ttlMs": s.TTL.Milliseconds(), "renewMs": s.Renew.Milliseconds(), "marginMs": s.Margin.Milliseconds(),
		"expires": rfc3339(s.Expires), "heldUntil": rfc3339(s.HeldUntil), "lastRenewal": rfc3339(s.LastRenewal), "dbExpires": rfc3339(s.DBExpires),
		"highWater": rfc3339(s.HighWater), "renewals": s.Renewals, "renewFailures": s.RenewFailures,
		"consecutiveFailures": s.ConsecutiveFailures, "lastError": s.LastError, "lost": s.Lost, "closed": s.Closed,
	}
}

// rfc3339 formats t for the status page; the zero time is "".
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

var _ snowflake.FinalHighWater = (*Lease)(nil)

// StoreFinal implements [snowflake.FinalHighWater]: mark (the generator's last issued
// millisecond + 1, given by Generator.Seal at a graceful stop) is written into the row by
// Close, in the same UPDATE that releases the lease, lowering the mark stored ahead of the
// clock, so that the next holder (this server restarted, or another) issues at once instead of
// waiting up to the high-water window (issue 15 item 6). Until Close the row keeps its higher
// mark; a Close whose release fails leaves it there, which only makes the next holder wait.
// A mark at or below 0 is ignored.
func (l *Lease) StoreFinal(_ context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	if ms <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.s.Err() != nil:
		return l.s.Err()
	case l.closed:
		return ErrClosed
	}
	l.finalMark = ms
	return nil
}
