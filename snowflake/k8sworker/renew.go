package k8sworker

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaf-go/leaf/snowflake/lease"
)

// renew is the lease.Session's Renew: it writes renewTime and a high-water mark of at least
// MarkAhead past the clock (and at least what Store asked for) into the Lease under its last
// resourceVersion. 404, or a 409 from another holder's write, is the loss (rule 4).
func (w *Worker) renew(ctx context.Context) (time.Duration, error) {
	o := &w.opts
	wall := o.wall()
	w.mu.Lock()
	l := w.lease.DeepCopy()
	mark := max(w.markMillis, w.wantMillis, wall.Add(o.MarkAhead).UnixMilli())
	w.mu.Unlock()
	now := metav1.NewMicroTime(wall)
	l.Spec.RenewTime = &now
	setMark(l, mark)
	got, err := w.cli.update(ctx, l)
	switch {
	case apierrors.IsNotFound(err):
		return 0, fmt.Errorf("%w: %w: lease %s/%s was deleted", lease.ErrLeaseLost, ErrLost, o.Namespace, w.name)
	case apierrors.IsConflict(err):
		return 0, w.conflict(ctx)
	case err != nil:
		return 0, fmt.Errorf("renew lease %s/%s: %w", o.Namespace, w.name, err)
	}
	if h := deref(got.Spec.HolderIdentity); h != o.Identity {
		return 0, fmt.Errorf("%w: %w: lease %s/%s is held by %q", lease.ErrLeaseLost, ErrLost, o.Namespace, w.name, h)
	}
	w.mu.Lock()
	w.lease = got
	w.markMillis = max(w.markMillis, mark)
	w.mu.Unlock()
	return o.LeaseDuration, nil
}

// conflict handles a 409: someone wrote the Lease since this holder's last write. Only another
// holder can have (the Session renews one call at a time), so the claim is lost, unless the
// Lease still names this holder (a write of ours whose answer was lost): then the new
// resourceVersion is adopted and the renewal counts as failed (the deadline does not move).
func (w *Worker) conflict(ctx context.Context) error {
	o := &w.opts
	cur, err := w.cli.get(ctx, o.Namespace, w.name)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %w: lease %s/%s was deleted", lease.ErrLeaseLost, ErrLost, o.Namespace, w.name)
	case err != nil:
		return fmt.Errorf("renew lease %s/%s: conflict, then: %w", o.Namespace, w.name, err)
	}
	if h := deref(cur.Spec.HolderIdentity); h != o.Identity {
		return fmt.Errorf("%w: %w: lease %s/%s was taken over by %q", lease.ErrLeaseLost, ErrLost, o.Namespace, w.name, h)
	}
	w.mu.Lock()
	w.lease = cur
	w.markMillis = max(w.markMillis, markOf(cur))
	w.mu.Unlock()
	return fmt.Errorf("renew lease %s/%s: conflict with a write of our own; retrying", o.Namespace, w.name)
}

// Store implements snowflake.HighWater: the mark is raised in the Lease (a renewal outside the
// schedule) unless a renewal has already written one at least as high, the usual case:
// renewals keep it MarkAhead past the clock. A write waits at most StoreTimeout. Errors: the
// loss (wrapping ErrLost and lease.ErrLeaseLost), ErrClosed, API errors.
func (w *Worker) Store(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	w.mu.Lock()
	closed, have := w.closed, w.markMillis
	w.askedMillis = ms
	if ms > have {
		w.wantMillis = max(w.wantMillis, ms)
	}
	w.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case w.s.Err() != nil:
		return w.s.Err()
	case ms <= have:
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
	defer cancel()
	if err := w.s.RenewNow(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.markMillis < ms {
		return fmt.Errorf("k8sworker: mark %d not stored", ms)
	}
	return nil
}

// Load implements snowflake.HighWater: the mark read with the claim (Claim has waited until
// the clock passed it), the zero time when the Lease had none. No I/O.
func (w *Worker) Load(context.Context) (time.Time, error) {
	if w.floor <= 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(w.floor), nil
}

// Close stops issuing and the renewals (lease.Session.Stop), then releases the Lease:
// holderIdentity "" and the mark lowered to the last one the generator asked for (an upper
// bound of every ID it issued; leaf-server seals the generator first, so that is the last
// issued millisecond). The next holder then takes the worker ID at once. A lost claim
// releases nothing. ctx bounds the release; later calls return the first call's result.
func (w *Worker) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.closeDone
		return w.closeErr
	}
	w.closed = true
	w.mu.Unlock()
	defer close(w.closeDone)
	w.s.Stop()
	var err error
	if w.s.Err() == nil {
		err = w.release(ctx)
	}
	w.mu.Lock()
	w.closeErr = err
	w.mu.Unlock()
	return err
}

// release writes holderIdentity "" and the final mark under the last resourceVersion.
func (w *Worker) release(ctx context.Context) error {
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
	if _, err := w.cli.update(ctx, l); err != nil {
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
func (w *Worker) Lost() <-chan struct{} { return w.s.Lost() }

// Expiry implements snowflake.Lease: lease.Session.Expiry, the last confirmed renewal's send +
// LeaseDuration − Margin on the monotonic, wall and boot clocks; lease.Expired once lost,
// closed, past, or while a claim without a mark is held back.
func (w *Worker) Expiry() time.Time { return w.s.Expiry() }

// Ready returns nil while the worker ID backs new IDs; otherwise why not (lease.Session.Ready:
// lost for this claim, closed, held back, or lapsed while renewals fail), naming the Lease.
func (w *Worker) Ready() error {
	if err := w.s.Ready(); err != nil {
		return fmt.Errorf("kubernetes lease %s/%s of worker ID %d: %w", w.opts.Namespace, w.name, w.workerID, err)
	}
	return nil
}

// LastHeartbeat returns the clock reading before the last confirmed renewal (or the claim)
// was sent.
func (w *Worker) LastHeartbeat() time.Time { return w.s.Stats().LastRenewal }

// Details returns the claim's state for the sourceState object of GET
// /api/v1/snowflake/status: namespace, lease, identity, leaseDurationMs, renewMs, marginMs,
// range [min, max], since, lastRenewal, expires, heldUntil, highWater (RFC 3339 UTC, "" for
// none), renewals, renewalFailures, consecutiveFailures, lastError, lost (the reason, "" while
// held), closed.
func (w *Worker) Details() any {
	st := w.s.Stats()
	w.mu.Lock()
	defer w.mu.Unlock()
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	hw := ""
	if w.markMillis > 0 {
		hw = rfc3339(time.UnixMilli(w.markMillis))
	}
	return map[string]any{
		"namespace": w.opts.Namespace, "lease": w.name, "identity": w.opts.Identity,
		"leaseDurationMs": w.opts.LeaseDuration.Milliseconds(), "renewMs": w.opts.Renew.Milliseconds(),
		"marginMs": w.opts.Margin.Milliseconds(), "range": []int64{w.opts.MinWorker, w.opts.MaxWorker},
		"since": rfc3339(w.since), "lastRenewal": rfc3339(st.LastRenewal), "expires": rfc3339(st.Expires),
		"heldUntil": rfc3339(st.HeldUntil), "highWater": hw,
		"renewals": st.Renewals, "renewalFailures": st.RenewFailures, "consecutiveFailures": st.ConsecutiveFailures,
		"lastError": errText(st.LastError), "lost": errText(st.Lost), "closed": w.closed,
	}
}

// LiveWorkers lists the worker IDs of [MinWorker, MaxWorker] whose Lease shows a holder that
// renewed within its duration (by the renewTime it wrote), this one's included: what
// leaf-server's /metrics counts as held.
func (w *Worker) LiveWorkers(ctx context.Context) ([]int64, error) {
	list, err := w.cli.list(ctx, w.opts.Namespace)
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
