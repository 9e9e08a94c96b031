package k8sworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaf-go/leaf/snowflake"
)

// run renews every Renew (Renew/2 after a failure) until ctx is cancelled or the claim is lost.
func (w *Worker) run(ctx context.Context) {
	defer close(w.done)
	timer := time.NewTimer(w.opts.Renew)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		began := time.Now()
		err := w.renewOnce(ctx, 0)
		interval := w.opts.Renew
		switch {
		case err == nil:
		case errors.Is(err, ErrLost), ctx.Err() != nil:
			return
		default:
			interval = w.opts.Renew / 2
			w.mu.Lock()
			n := w.consecutive
			w.mu.Unlock()
			w.log.Warn("kubernetes lease renewal of the snowflake worker ID failed", "err", err, "worker_id", w.workerID,
				"consecutive_failures", n, "expires_in", w.Expiry().Sub(w.opts.Clock.Now()).Round(time.Millisecond))
		}
		timer.Reset(max(interval-time.Since(began), 0))
	}
}

// renewOnce writes renewTime and a high-water mark of at least minMark (Unix ms; 0: just
// MarkAhead past the clock) into the Lease under its last resourceVersion. Only a successful
// write moves the deadline, from the instant read before it was sent. 404 or a 409 from
// another holder's write makes the loss final (rule 4).
func (w *Worker) renewOnce(ctx context.Context, minMark int64) error {
	select {
	case w.writeSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-w.writeSem }()
	o := &w.opts
	sentMono, sentWall, sentBoot := o.Clock.Now(), o.Wall(), o.Boot.Boot()
	w.mu.Lock()
	if w.lostReason != "" {
		w.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrLost, w.lostReason)
	}
	l := w.lease.DeepCopy()
	mark := max(w.markMillis, minMark, sentWall.Add(o.MarkAhead).UnixMilli())
	w.mu.Unlock()
	now := metav1.NewMicroTime(sentWall)
	l.Spec.RenewTime = &now
	setMark(l, mark)
	rctx, cancel := context.WithTimeout(ctx, o.Renew)
	defer cancel()
	got, err := w.cli.CoordinationV1().Leases(o.Namespace).Update(rctx, l, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return w.markLost(fmt.Sprintf("lease %s/%s was deleted", o.Namespace, w.name))
	case apierrors.IsConflict(err):
		return w.conflict(ctx)
	case err != nil:
		return w.failed(fmt.Errorf("renew lease %s/%s: %w", o.Namespace, w.name, err))
	}
	if deref(got.Spec.HolderIdentity) != o.Identity {
		return w.markLost(fmt.Sprintf("lease %s/%s is held by %q", o.Namespace, w.name, deref(got.Spec.HolderIdentity)))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lease = got
	w.markMillis = max(w.markMillis, mark)
	w.renewals++
	w.consecutive = 0
	w.lastErr = nil
	w.lastRenew = sentWall
	if w.lostReason == "" && !w.closed {
		w.dl.Store(&deadline{mono: sentMono.Add(o.LeaseDuration - o.Margin),
			ld: snowflake.NewLeaseDeadline(sentWall, sentBoot, o.LeaseDuration-o.Margin)})
	}
	return nil
}

// conflict handles a 409: someone else wrote the Lease since this holder's last write. Only
// another holder can have (this process writes one at a time), so the claim is lost, unless
// the Lease still names this holder (a write of ours whose answer was lost), in which case
// the new resourceVersion is adopted without moving the deadline.
func (w *Worker) conflict(ctx context.Context) error {
	o := &w.opts
	rctx, cancel := context.WithTimeout(ctx, o.Renew)
	defer cancel()
	cur, err := w.cli.CoordinationV1().Leases(o.Namespace).Get(rctx, w.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return w.markLost(fmt.Sprintf("lease %s/%s was deleted", o.Namespace, w.name))
	case err != nil:
		return w.failed(fmt.Errorf("renew lease %s/%s: conflict, then: %w", o.Namespace, w.name, err))
	}
	if h := deref(cur.Spec.HolderIdentity); h != o.Identity {
		return w.markLost(fmt.Sprintf("lease %s/%s was taken over by %q", o.Namespace, w.name, h))
	}
	w.mu.Lock()
	w.lease = cur
	w.markMillis = max(w.markMillis, markOf(cur))
	w.mu.Unlock()
	return w.failed(fmt.Errorf("renew lease %s/%s: conflict with a write of our own; retrying", o.Namespace, w.name))
}

// failed counts a failed renewal and returns err.
func (w *Worker) failed(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures++
	w.consecutive++
	w.lastErr = err
	return err
}

// markLost makes the loss final: Expiry is past from now on, Lost is closed, Ready says why.
func (w *Worker) markLost(reason string) error {
	w.dl.Store(nil)
	w.mu.Lock()
	first := w.lostReason == ""
	if first {
		w.lostReason = reason
	}
	w.mu.Unlock()
	if first {
		w.log.Error("snowflake worker ID lease lost: no snowflake IDs from this claim", "worker_id", w.workerID, "reason", reason)
		close(w.lost)
	}
	return fmt.Errorf("%w: %s", ErrLost, reason)
}

// Store implements snowflake.HighWater: the mark is raised in the Lease unless a renewal has
// already written one at least as high (the usual case: renewals keep it MarkAhead past the
// clock). A write waits at most StoreTimeout. Errors: ErrLost, ErrClosed, API errors.
func (w *Worker) Store(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	w.mu.Lock()
	closed, lost, have := w.closed, w.lostReason, w.markMillis
	w.askedMillis = ms
	w.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case lost != "":
		return fmt.Errorf("%w: %s", ErrLost, lost)
	case ms <= have:
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
	defer cancel()
	return w.renewOnce(ctx, ms)
}

// Load implements snowflake.HighWater: the mark read with the claim (Claim has waited until
// the clock passed it), the zero time when the Lease had none. No I/O.
func (w *Worker) Load(context.Context) (time.Time, error) {
	if w.floor <= 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(w.floor), nil
}

// Close stops issuing (Expiry is past from the first call), stops the renewals and releases
// the Lease: holderIdentity "" and the mark lowered to the last one the generator asked for
// (an upper bound of every ID it issued; leaf-server seals the generator first, so that is
// the last issued millisecond). The next holder then takes the worker ID without waiting out
// the lease duration. A lost claim releases nothing. ctx bounds the release; later calls
// return the first call's result.
func (w *Worker) Close(ctx context.Context) error {
	w.dl.Store(nil)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return w.closeErr
	}
	w.closed = true
	lost := w.lostReason != ""
	w.mu.Unlock()
	w.cancel()
	<-w.done
	var err error
	if !lost {
		err = w.release(ctx)
	}
	w.mu.Lock()
	w.closeErr = err
	w.mu.Unlock()
	return err
}

// release writes holderIdentity "" and the final mark under the last resourceVersion.
func (w *Worker) release(ctx context.Context) error {
	w.writeSem <- struct{}{}
	defer func() { <-w.writeSem }()
	w.mu.Lock()
	l := w.lease.DeepCopy()
	final := w.askedMillis
	if final <= 0 {
		final = w.markMillis
	}
	w.mu.Unlock()
	empty := ""
	l.Spec.HolderIdentity = &empty
	setMark(l, max(final, w.floor))
	if _, err := w.cli.CoordinationV1().Leases(w.opts.Namespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("k8sworker: release lease %s/%s: %w", w.opts.Namespace, w.name, err)
	}
	w.log.Info("snowflake worker ID released", "worker_id", w.workerID, "lease", w.name)
	return nil
}

// Name returns "kubernetes".
func (w *Worker) Name() string { return "kubernetes" }

// WorkerID returns the claimed worker ID, in [MinWorker, MaxWorker]. It never changes.
func (w *Worker) WorkerID() int64 { return w.workerID }

// LeaseName returns the name of the held Lease, <Prefix><id>.
func (w *Worker) LeaseName() string { return w.name }

// Lost returns a channel that is closed when the claim is lost for good (Lease deleted or
// taken over).
func (w *Worker) Lost() <-chan struct{} { return w.lost }

// Expiry implements snowflake.Lease: the instant (on Clock) from which the worker ID may
// belong to another holder, sent + LeaseDuration − Margin where sent is when the last
// successful renewal was sent. Once lost, closed, or past that deadline on the wall clock or
// CLOCK_BOOTTIME (a suspended host), it returns 1970-01-01T00:00:00Z.
func (w *Worker) Expiry() time.Time {
	d := w.dl.Load()
	if d == nil || d.ld.Remaining(w.opts.Wall(), w.opts.Boot.Boot()) <= 0 {
		return expiredAt
	}
	return d.mono
}

// Ready returns nil while the worker ID backs new IDs; otherwise why not: lost (final for this
// claim), closed, or the deadline passed (renewals failing; the next successful renewal of
// the same Lease resumes).
func (w *Worker) Ready() error {
	w.mu.Lock()
	lostReason, closed, last, lastErr := w.lostReason, w.closed, w.lastRenew, w.lastErr
	w.mu.Unlock()
	switch {
	case lostReason != "":
		return fmt.Errorf("kubernetes lease of worker ID %d lost (%s)", w.workerID, lostReason)
	case closed:
		return errors.New("kubernetes worker ID lease released (closed)")
	}
	if !w.opts.Clock.Now().Before(w.Expiry()) {
		msg := fmt.Sprintf("kubernetes lease of worker ID %d may have expired: last successful renewal %s ago",
			w.workerID, w.opts.Wall().Sub(last).Round(time.Millisecond))
		if lastErr != nil {
			msg += " (last error: " + lastErr.Error() + ")"
		}
		return errors.New(msg + "; no snowflake IDs until a renewal succeeds")
	}
	return nil
}

// LastHeartbeat returns the wall instant before the last successful renewal was sent.
func (w *Worker) LastHeartbeat() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastRenew
}

// Details returns the claim's state for the sourceState object of GET
// /api/v1/snowflake/status: namespace, lease, identity, leaseDurationMs, renewMs, marginMs,
// range [min, max], since, lastRenewal, highWater (RFC 3339 UTC, "" for none), renewals,
// renewalFailures, consecutiveFailures, lastError, lost (the reason, "" while held), closed.
func (w *Worker) Details() any {
	w.mu.Lock()
	defer w.mu.Unlock()
	lastErr := ""
	if w.lastErr != nil {
		lastErr = w.lastErr.Error()
	}
	hw := ""
	if w.markMillis > 0 {
		hw = rfc3339(time.UnixMilli(w.markMillis))
	}
	return map[string]any{
		"namespace": w.opts.Namespace, "lease": w.name, "identity": w.opts.Identity,
		"leaseDurationMs": w.opts.LeaseDuration.Milliseconds(), "renewMs": w.opts.Renew.Milliseconds(),
		"marginMs": w.opts.Margin.Milliseconds(), "range": []int64{w.opts.MinWorker, w.opts.MaxWorker},
		"since": rfc3339(w.since), "lastRenewal": rfc3339(w.lastRenew), "highWater": hw,
		"renewals": w.renewals, "renewalFailures": w.failures, "consecutiveFailures": w.consecutive,
		"lastError": lastErr, "lost": w.lostReason, "closed": w.closed,
	}
}

// LiveWorkers lists the worker IDs of [MinWorker, MaxWorker] whose Lease shows a holder that
// renewed within its duration (by the renewTime it wrote), this one's included: what
// leaf-server's /metrics counts as held.
func (w *Worker) LiveWorkers(ctx context.Context) ([]int64, error) {
	list, err := w.cli.CoordinationV1().Leases(w.opts.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("k8sworker: list leases in namespace %s: %w", w.opts.Namespace, err)
	}
	var ids []int64
	for i := range list.Items {
		l := &list.Items[i]
		if id, ok := w.opts.idOf(l.Name); ok && id >= w.opts.MinWorker && id <= w.opts.MaxWorker && w.opts.live(l) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// rfc3339 formats t for the status page; the zero time is "".
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
