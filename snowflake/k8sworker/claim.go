package k8sworker

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leaf-go/leaf/snowflake"
)

// Worker is a claimed worker ID: a Lease this process holds. It is a snowflake.Source; all
// methods are safe for concurrent use.
type Worker struct {
	opts     Options
	cli      kubernetes.Interface
	log      *slog.Logger
	workerID int64
	name     string
	since    time.Time
	floor    int64 // the mark read with the claim, Unix ms; 0 for none

	dl       atomic.Pointer[deadline]
	writeSem chan struct{} // 1 slot: one Lease write at a time (renewal, Store, release)
	cancel   context.CancelFunc
	done     chan struct{} // closed when run has returned
	lost     chan struct{} // closed when the claim is lost for good

	mu          sync.Mutex // guards the fields below
	lease       *coordinationv1.Lease
	markMillis  int64 // the highest mark written into the Lease
	askedMillis int64 // the last mark the generator asked Store for
	lastRenew   time.Time
	renewals    int64
	failures    int64
	consecutive int64
	lastErr     error
	lostReason  string
	closed      bool
	closeErr    error
}

// deadline is the end of the lease's validity on the generator's clock (mono) and on the
// clocks that count suspended time (ld).
type deadline struct {
	mono time.Time
	ld   snowflake.LeaseDeadline
}

var _ snowflake.Source = (*Worker)(nil)

// expiredAt is what Expiry returns once lost, lapsed or closed: long past, and not the zero
// time, which means "never expires" to snowflake.Lease.
var expiredAt = time.Unix(0, 0).UTC()

// Claim takes a worker ID's Lease (the package doc's rules 1 and 3), waits until a previous
// holder may still issue no more and the clock has passed the Lease's high-water mark, then
// renews it in the background until Close. Errors: ErrOptions, ErrNoFreeWorker (every ID of the
// range held; Claim does not wait for one to free up: the caller retries), API errors
// (unreachable API server, forbidden: the Role is missing), ctx's error.
func Claim(ctx context.Context, opts Options) (*Worker, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	w := &Worker{opts: opts, cli: opts.Client, log: opts.Logger.With("source", "kubernetes", "namespace", opts.Namespace),
		writeSem: make(chan struct{}, 1), done: make(chan struct{}), lost: make(chan struct{})}
	lease, wait, err := w.take(ctx)
	if err != nil {
		return nil, err
	}
	// Renew from now on, also while waiting, so that the Lease stays visibly held.
	rctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.run(rctx)
	fail := func(err error) (*Worker, error) {
		_ = w.Close(context.Background())
		return nil, err
	}
	if wait > 0 {
		w.log.Info("snowflake: waiting out a previous holder's lease before issuing", "worker_id", w.workerID, "lease", lease.Name, "wait", wait.Round(time.Millisecond))
		if err := sleep(ctx, wait); err != nil {
			return fail(err)
		}
	}
	if w.floor > 0 {
		mark := time.UnixMilli(w.floor)
		if d := mark.Sub(w.opts.Wall()); d > 0 {
			w.log.Info("snowflake: waiting for the clock to pass the worker ID's high-water mark", "worker_id", w.workerID, "mark", mark, "wait", d)
			if err := sleep(ctx, d+time.Millisecond); err != nil {
				return fail(err)
			}
		}
	}
	select {
	case <-w.lost:
		return fail(fmt.Errorf("%w while waiting to serve: %s", ErrLost, w.Ready()))
	default:
	}
	w.log.Info("snowflake worker ID claimed", "worker_id", w.workerID, "lease", w.name, "identity", w.opts.Identity)
	return w, nil
}

// take claims one Lease and returns it with how long to wait before serving (rule 3).
func (w *Worker) take(ctx context.Context) (*coordinationv1.Lease, time.Duration, error) {
	o := &w.opts
	rctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	list, err := w.cli.CoordinationV1().Leases(o.Namespace).List(rctx, metav1.ListOptions{})
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("k8sworker: list leases in namespace %s: %w", o.Namespace, err)
	}
	existing := map[int64]coordinationv1.Lease{}
	for _, l := range list.Items {
		if id, ok := o.idOf(l.Name); ok {
			existing[id] = l
		}
	}
	order := make([]int64, 0, o.MaxWorker-o.MinWorker+2)
	if o.Preferred >= o.MinWorker && o.Preferred <= o.MaxWorker {
		order = append(order, o.Preferred)
	} else if o.Preferred >= 0 {
		w.log.Warn("snowflake: the pod's preferred worker ID is outside --worker-id-min..--worker-id-max; taking the lowest free one",
			"preferred", o.Preferred, "min", o.MinWorker, "max", o.MaxWorker)
	}
	for id := o.MinWorker; id <= o.MaxWorker; id++ {
		if id != o.Preferred {
			order = append(order, id)
		}
	}
	var held []string
	for _, id := range order {
		l, ok := existing[id]
		if ok && o.live(&l) {
			held = append(held, fmt.Sprintf("%d (%s)", id, deref(l.Spec.HolderIdentity)))
			continue
		}
		if ok {
			if m := markOf(&l); m > 0 && time.UnixMilli(m).Sub(o.Wall()) > o.MaxMarkWait {
				w.log.Warn("snowflake: skipping a worker ID whose high-water mark is far ahead of the clock",
					"worker_id", id, "mark", time.UnixMilli(m), "max_mark_wait", o.MaxMarkWait)
				held = append(held, fmt.Sprintf("%d (mark %s ahead)", id, time.Until(time.UnixMilli(m)).Round(time.Second)))
				continue
			}
		}
		lease, wait, err := w.takeOne(ctx, id, ok, &l)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			held = append(held, fmt.Sprintf("%d (taken concurrently)", id))
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		return lease, wait, nil
	}
	sort.Strings(held)
	return nil, 0, fmt.Errorf("%w in [%d, %d] of namespace %s: held: %s", ErrNoFreeWorker, o.MinWorker, o.MaxWorker, o.Namespace, strings.Join(held, ", "))
}

// takeOne creates the Lease of id (exists false) or updates the one read (prev) to this
// holder under its resourceVersion.
func (w *Worker) takeOne(ctx context.Context, id int64, exists bool, prev *coordinationv1.Lease) (*coordinationv1.Lease, time.Duration, error) {
	o := &w.opts
	sentMono, sentWall, sentBoot := o.Clock.Now(), o.Wall(), o.Boot.Boot()
	dur := int32(o.LeaseDuration / time.Second)
	now := metav1.NewMicroTime(sentWall)
	ident := o.Identity
	var (
		l    *coordinationv1.Lease
		wait time.Duration
		mark int64
	)
	if exists {
		l = prev.DeepCopy()
		mark = markOf(l)
		released := deref(l.Spec.HolderIdentity) == ""
		if !released {
			wait = o.LeaseDuration // rule 3: a holder that did not release may still issue
		}
		transitions := int32(1)
		if l.Spec.LeaseTransitions != nil {
			transitions = *l.Spec.LeaseTransitions + 1
		}
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &ident, &dur
		l.Spec.AcquireTime, l.Spec.RenewTime, l.Spec.LeaseTransitions = &now, &now, &transitions
	} else {
		// No history: a holder of a Lease deleted by hand may still be issuing.
		wait = o.LeaseDuration
		zero := int32(0)
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: leaseName(o.Prefix, id), Namespace: o.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "leaf-go"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &ident, LeaseDurationSeconds: &dur,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: &zero},
		}
	}
	newMark := max(mark, sentWall.Add(o.MarkAhead).UnixMilli())
	setMark(l, newMark)
	rctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	defer cancel()
	var got *coordinationv1.Lease
	var err error
	if exists {
		got, err = w.cli.CoordinationV1().Leases(o.Namespace).Update(rctx, l, metav1.UpdateOptions{})
	} else {
		got, err = w.cli.CoordinationV1().Leases(o.Namespace).Create(rctx, l, metav1.CreateOptions{})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			err = fmt.Errorf("k8sworker: take lease %s/%s: %w", o.Namespace, l.Name, err)
		}
		return nil, 0, err
	}
	w.workerID, w.name, w.since, w.floor = id, got.Name, sentWall, mark
	w.lease, w.markMillis, w.lastRenew = got, newMark, sentWall
	w.dl.Store(&deadline{mono: sentMono.Add(o.LeaseDuration - o.Margin),
		ld: snowflake.NewLeaseDeadline(sentWall, sentBoot, o.LeaseDuration-o.Margin)})
	return got, wait, nil
}

// idOf parses a Lease name <Prefix><id> into a worker ID.
func (o *Options) idOf(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, o.Prefix)
	if !ok || s == "" {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != s {
		return 0, false
	}
	return id, true
}

// live reports whether l shows a holder that renewed within its duration by the renewTime it
// wrote (the holder's clock). Only a preference: taking a Lease that looks dead still waits
// out its duration (rule 3).
func (o *Options) live(l *coordinationv1.Lease) bool {
	if deref(l.Spec.HolderIdentity) == "" || l.Spec.RenewTime == nil {
		return false
	}
	dur := o.LeaseDuration
	if l.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return l.Spec.RenewTime.Add(dur).After(o.Wall())
}

// markOf reads the high-water annotation, 0 when absent or unreadable.
func markOf(l *coordinationv1.Lease) int64 {
	v, err := strconv.ParseInt(l.Annotations[MarkAnnotation], 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// setMark writes the high-water annotation.
func setMark(l *coordinationv1.Lease, ms int64) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[MarkAnnotation] = strconv.FormatInt(ms, 10)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
