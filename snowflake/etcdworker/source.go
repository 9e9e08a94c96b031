package etcdworker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The rest of snowflake.Source: what the generator, the status page, /readyz and /metrics read.

// Name returns "etcd".
func (w *Worker) Name() string { return "etcd" }

// WorkerID returns the claimed worker ID, in [MinWorker, MaxWorker]. It never changes: after a
// loss, a new Worker may get another one.
func (w *Worker) WorkerID() int64 { return w.workerID }

// Key returns the claim key, <prefix>/workers/<id>.
func (w *Worker) Key() string { return w.key }

// Lost returns a channel that is closed when the claim is lost for good (lease gone, key taken
// over or deleted).
func (w *Worker) Lost() <-chan struct{} { return w.lost }

// Expiry implements snowflake.Lease: the instant (on Clock) from which the worker ID may belong
// to another server, sent + TTL − Margin where sent is when the last successful keepalive was
// sent. When the wall clock has passed the same deadline (the host was suspended: Go's
// monotonic clock stood still while etcd's did not), when the claim is lost, or after Close,
// it returns 1970-01-01T00:00:00Z (long past). One atomic load and one wall-clock read; the
// generator calls it on every Next.
func (w *Worker) Expiry() time.Time {
	d := w.dl.Load()
	if d == nil || !w.opts.Wall().Before(d.wall) {
		return expiredAt
	}
	return d.mono
}

// Load implements snowflake.HighWater: the high-water mark read with the claim, the zero time
// if the ID never had one. Claim has already waited until the clock passed it. No I/O.
func (w *Worker) Load(context.Context) (time.Time, error) {
	if w.floorMillis <= 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(w.floorMillis), nil
}

// Ready returns nil while the worker ID backs new IDs; otherwise why not: lost (for good:
// restart the server), closed, or the deadline passed (keepalives failing; it recovers with
// the next successful keepalive of the same lease).
func (w *Worker) Ready() error {
	w.mu.Lock()
	lostReason, closed, last, lastErr := w.lostReason, w.closed, w.lastKeepAlive, w.lastErr
	w.mu.Unlock()
	switch {
	case lostReason != "":
		return fmt.Errorf("etcd worker ID %d lost (%s): restart leaf-server to claim a new one", w.workerID, lostReason)
	case closed:
		return errors.New("etcd worker ID released (closed)")
	}
	if !w.opts.Clock.Now().Before(w.Expiry()) {
		msg := fmt.Sprintf("etcd lease of worker ID %d may have expired: last successful keepalive %s ago",
			w.workerID, w.opts.Wall().Sub(last).Round(time.Millisecond))
		if lastErr != nil {
			msg += " (last error: " + lastErr.Error() + ")"
		}
		return errors.New(msg + "; no snowflake IDs until a keepalive of the same lease succeeds")
	}
	return nil
}

// LastHeartbeat returns the wall instant before the last successful keepalive (or the claim)
// was sent.
func (w *Worker) LastHeartbeat() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastKeepAlive
}

// Details returns the claim's state for the sourceState object of GET
// /api/v1/snowflake/status: endpoints, key, highWaterKey, leaseId (hex), ttlMs, keepAliveMs,
// marginMs, range [min, max], since, lastKeepAlive, expires (wall; "" when lost or closed),
// highWater (instants in RFC 3339 UTC, "" for none), keepAlives, keepAliveFailures,
// consecutiveFailures, lastError, lost (the reason, "" while held) and closed.
func (w *Worker) Details() any {
	w.mu.Lock()
	defer w.mu.Unlock()
	expires := ""
	if d := w.dl.Load(); d != nil {
		expires = rfc3339(d.wall)
	}
	lastErr := ""
	if w.lastErr != nil {
		lastErr = w.lastErr.Error()
	}
	hw := ""
	if w.markMillis > 0 {
		hw = rfc3339(time.UnixMilli(w.markMillis))
	}
	return map[string]any{
		"endpoints": strings.Join(w.opts.Endpoints, ","), "key": w.key, "highWaterKey": w.hwKey,
		"leaseId": leaseHex(w.lease), "ttlMs": w.opts.TTL.Milliseconds(), "keepAliveMs": w.opts.KeepAlive.Milliseconds(),
		"marginMs": w.opts.Margin.Milliseconds(), "range": []int64{w.opts.MinWorker, w.opts.MaxWorker},
		"since": rfc3339(w.since), "lastKeepAlive": rfc3339(w.lastKeepAlive), "expires": expires, "highWater": hw,
		"keepAlives": w.keepAlives, "keepAliveFailures": w.failures, "consecutiveFailures": w.consecutive,
		"lastError": lastErr, "lost": w.lostReason, "closed": w.closed,
	}
}

// rfc3339 formats t for the status page; the zero time is "".
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
