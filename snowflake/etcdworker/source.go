package etcdworker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-go/leaf/snowflake/lease"
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
func (w *Worker) Lost() <-chan struct{} { return w.s.Lost() }

// Err returns the loss (wrapping ErrLost and lease.ErrLeaseLost), nil while held.
func (w *Worker) Err() error { return w.s.Err() }

// WaitNoHistory waits until a claim that found no mark may serve (at once for one that found
// one): see lease.Session.WaitNoHistory.
func (w *Worker) WaitNoHistory(ctx context.Context) error { return w.s.WaitNoHistory(ctx) }

// Expiry implements snowflake.Lease: the instant (on Clock) from which the worker ID may belong
// to another server, sent + TTL − Margin where sent is when the last successful keepalive was
// sent, ended earlier by the wall or boot clock after a suspend (lease.Deadline). While a
// claim without a mark is held back, once the claim is lost, and after Close, it returns
// lease.Expired (1970, long past). No I/O; the generator calls it on every Next.
func (w *Worker) Expiry() time.Time { return w.s.Expiry() }

// Load implements snowflake.HighWater: the high-water mark read with the claim, the zero time
// if the ID never had one. Claim has already waited until the clock passed it. No I/O.
func (w *Worker) Load(context.Context) (time.Time, error) {
	if w.floorMillis <= 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(w.floorMillis), nil
}

// Ready returns nil while the worker ID backs new IDs; otherwise why not: lost (the error wraps
// lease.ErrLeaseLost; a new claim is needed), closed, a claim without a mark still held back,
// or the deadline passed (keepalives failing; it recovers with the next successful keepalive
// of the same lease).
func (w *Worker) Ready() error {
	err := w.s.Ready()
	switch {
	case errors.Is(err, lease.ErrStopped):
		return fmt.Errorf("etcd worker ID %d: %w", w.workerID, ErrClosed)
	case err != nil:
		return fmt.Errorf("etcd worker ID %d: %w", w.workerID, err)
	}
	return nil
}

// LastHeartbeat returns the instant before the last successful keepalive (or the claim) was
// sent.
func (w *Worker) LastHeartbeat() time.Time { return w.s.Stats().LastRenewal }

// Details returns the claim's state for the sourceState object of GET
// /api/v1/snowflake/status: endpoints, key, highWaterKey, leaseId (hex), ttlMs, keepAliveMs,
// marginMs, range [min, max], since, lastKeepAlive, expires (wall; "" when lost or closed),
// heldUntil (a claim without a mark held back until then; "" otherwise),
// highWater (instants in RFC 3339 UTC, "" for none), keepAlives, keepAliveFailures,
// consecutiveFailures, lastError, lost (the reason, "" while held) and closed.
func (w *Worker) Details() any {
	st := w.s.Stats()
	w.mu.Lock()
	defer w.mu.Unlock()
	lastErr, lost := "", ""
	if st.LastError != nil {
		lastErr = st.LastError.Error()
	}
	if st.Lost != nil {
		lost = st.Lost.Error()
	}
	hw := ""
	if w.markMillis > 0 {
		hw = rfc3339(time.UnixMilli(w.markMillis))
	}
	return map[string]any{
		"endpoints": strings.Join(w.opts.Endpoints, ","), "key": w.key, "highWaterKey": w.hwKey,
		"leaseId": leaseHex(w.lease), "ttlMs": w.opts.TTL.Milliseconds(), "keepAliveMs": w.opts.Renew.Milliseconds(),
		"marginMs": w.opts.Margin.Milliseconds(), "range": []int64{w.opts.MinWorker, w.opts.MaxWorker},
		"since": rfc3339(w.since), "lastKeepAlive": rfc3339(st.LastRenewal), "expires": rfc3339(st.Expires),
		"heldUntil": rfc3339(st.HeldUntil), "highWater": hw,
		"keepAlives": st.Renewals, "keepAliveFailures": st.RenewFailures, "consecutiveFailures": st.ConsecutiveFailures,
		"lastError": lastErr, "lost": lost, "closed": w.closed,
	}
}

// rfc3339 formats t for the status page; the zero time is "".
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// LiveWorkers lists the worker IDs of [MinWorker, MaxWorker] that have a claim key, this one's
// included: a claim key lives only as long as its holder's etcd lease, so each has a live
// holder. One keys-only range read; what leaf-server's /metrics counts as held.
func (w *Worker) LiveWorkers(ctx context.Context) ([]int64, error) {
	prefix := w.opts.Prefix + "/workers/"
	resp, err := w.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcdworker: list %s: %w", prefix, err)
	}
	var ids []int64
	for _, kv := range resp.Kvs {
		id, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), prefix), 10, 64)
		if err == nil && id >= w.opts.MinWorker && id <= w.opts.MaxWorker {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
