package k8sworker

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// Worker is a claimed worker ID: a Lease this process holds. It is a snowflake.Source; all
// methods are safe for concurrent use.
type Worker struct {
	opts     Options
	cli      *Client
	log      *slog.Logger
	workerID int64
	name     string
	since    time.Time
	floor    int64 // the mark read with the claim, Unix ms; 0 for none
	s        *lease.Session

	mu          sync.Mutex // guards the fields below
	lease       *coordinationv1.Lease
	markMillis  int64 // the highest mark written into the Lease
	wantMillis  int64 // the mark the next write must carry at least (Store)
	askedMillis int64 // the last mark the generator asked Store for
	closed      bool
	closeErr    error
	closeDone   chan struct{} // closed when the first Close has returned
}

var _ snowflake.Source = (*Worker)(nil)

// Claim takes a worker ID's Lease (the package doc's rule 1), starts its lease.Session
// (renewals every Renew until Close) and waits until the clock has passed the Lease's
// high-water mark. A Lease without a mark holds the claim back for LeaseDuration + Margin
// without blocking Claim: Expiry stays expired and Ready says why until then. Errors:
// ErrOptions, ErrNoFreeWorker (every ID of the range held; Claim does not wait for one to
// free up), API errors (unreachable API server; forbidden: the Role is missing), ctx's error.
func Claim(ctx context.Context, opts Options) (*Worker, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	w := &Worker{opts: opts, cli: opts.Client, log: opts.Logger.With("source", "kubernetes", "namespace", opts.Namespace),
		closeDone: make(chan struct{})}
	sent, err := w.take(ctx)
	if err != nil {
		return nil, err
	}
	w.s, err = lease.Start(lease.Config{Policy: opts.policy(), Clock: opts.Clock, Renew: w.renew,
		NoHistory: w.floor == 0, Logger: w.log.With("worker_id", w.workerID, "lease", w.name)}, sent, opts.LeaseDuration)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	w.log.Info("snowflake worker ID claimed", "worker_id", w.workerID, "lease", w.name, "identity", opts.Identity,
		"high_water_ms", w.floor, "no_history", w.floor == 0)
	if d := time.UnixMilli(w.floor).Sub(opts.wall()); w.floor > 0 && d > 0 {
		w.log.Info("snowflake: waiting for the clock to pass the worker ID's high-water mark", "worker_id", w.workerID, "wait", d)
		if err := sleep(ctx, d+time.Millisecond); err != nil {
			_ = w.Close(context.Background())
			return nil, err
		}
	}
	return w, nil
}

// take claims one Lease and returns the Instant read before the claiming write was sent.
func (w *Worker) take(ctx context.Context) (lease.Instant, error) {
	o := &w.opts
	rctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	list, err := w.cli.list(rctx, o.Namespace)
	cancel()
	if err != nil {
		return lease.Instant{}, fmt.Errorf("k8sworker: list leases in namespace %s: %w", o.Namespace, err)
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
			if m := markOf(&l); m > 0 && time.UnixMilli(m).Sub(o.wall()) > o.MaxMarkWait {
				w.log.Warn("snowflake: skipping a worker ID whose high-water mark is far ahead of the clock",
					"worker_id", id, "mark", time.UnixMilli(m), "max_mark_wait", o.MaxMarkWait)
				held = append(held, fmt.Sprintf("%d (mark %s ahead)", id, time.Until(time.UnixMilli(m)).Round(time.Second)))
				continue
			}
		}
		sent, err := w.takeOne(ctx, id, ok, &l)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			held = append(held, fmt.Sprintf("%d (taken concurrently)", id))
			continue
		}
		if err != nil {
			return lease.Instant{}, err
		}
		return sent, nil
	}
	sort.Strings(held)
	return lease.Instant{}, fmt.Errorf("%w in [%d, %d] of namespace %s: held: %s", ErrNoFreeWorker, o.MinWorker, o.MaxWorker, o.Namespace, strings.Join(held, ", "))
}

// takeOne creates the Lease of id (exists false) or updates the one read (prev) to this
// holder under its resourceVersion.
func (w *Worker) takeOne(ctx context.Context, id int64, exists bool, prev *coordinationv1.Lease) (lease.Instant, error) {
	o := &w.opts
	sent := lease.Read(o.Clock)
	sentWall := sent.Now.Round(0)
	dur := int32(o.LeaseDuration / time.Second)
	now := metav1.NewMicroTime(sentWall)
	ident := o.Identity
	var (
		l    *coordinationv1.Lease
		mark int64
	)
	if exists {
		l = prev.DeepCopy()
		mark = markOf(l)
		transitions := int32(1)
		if l.Spec.LeaseTransitions != nil {
			transitions = *l.Spec.LeaseTransitions + 1
		}
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &ident, &dur
		l.Spec.AcquireTime, l.Spec.RenewTime, l.Spec.LeaseTransitions = &now, &now, &transitions
	} else {
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
		got, err = w.cli.update(rctx, l)
	} else {
		got, err = w.cli.create(rctx, l)
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			err = fmt.Errorf("k8sworker: take lease %s/%s: %w", o.Namespace, l.Name, err)
		}
		return lease.Instant{}, err
	}
	w.workerID, w.name, w.since, w.floor = id, got.Name, sentWall, mark
	w.lease, w.markMillis = got, newMark
	return sent, nil
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
// wrote (the holder's clock). Only a preference: the mark (rule 3) keeps a holder that only
// looked dead apart.
func (o *Options) live(l *coordinationv1.Lease) bool {
	if deref(l.Spec.HolderIdentity) == "" || l.Spec.RenewTime == nil {
		return false
	}
	dur := o.LeaseDuration
	if l.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return l.Spec.RenewTime.Add(dur).After(o.wall())
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
