package etcdworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-go/leaf/snowflake"
)

// keepAliveOnce is the lease.Session's renewal: it renews the lease, then, in one
// transaction fenced by the claim key's CreateRevision, rewrites the clock report and raises
// the high-water mark to MarkAhead past the clock. It returns the TTL etcd granted only when
// both succeed (the Session moves the deadline from the instant read before it was called).
// "Lease not found" or a failed fence is the loss (wrapping ErrLost).
func (w *Worker) keepAliveOnce(ctx context.Context) (time.Duration, error) {
	cctx := clientv3.WithRequireLeader(ctx)
	ka, err := w.cli.KeepAliveOnce(cctx, w.lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, fmt.Errorf("%w: %w", ErrLost, errLeaseGone)
	}
	if err != nil {
		return 0, fmt.Errorf("keepalive: %w", err)
	}
	select {
	case w.writeSem <- struct{}{}:
	case <-cctx.Done():
		return 0, fmt.Errorf("keepalive: high-water write in flight: %w", cctx.Err())
	}
	defer func() { <-w.writeSem }()
	w.mu.Lock()
	mark := max(w.markMillis, w.opts.wall().Add(w.opts.MarkAhead).UnixMilli())
	w.mu.Unlock()
	val, _ := json.Marshal(report{Addr: w.opts.Owner, TS: w.opts.wall().UnixMilli(), Lease: leaseHex(w.lease), Since: w.since.UnixMilli()})
	tr, err := w.fenced(cctx, clientv3.OpPut(w.key, string(val), clientv3.WithLease(w.lease)), w.putMark(mark)).Commit()
	if err != nil {
		return 0, fmt.Errorf("report and high-water write: %w", err)
	}
	if !tr.Succeeded {
		return 0, w.fenceLost()
	}
	w.mu.Lock()
	w.markMillis = max(w.markMillis, mark)
	w.mu.Unlock()
	return time.Duration(ka.TTL) * time.Second, nil
}

// fenceLost is the loss when a fenced write found the claim key gone or re-created.
func (w *Worker) fenceLost() error {
	return fmt.Errorf("%w: %s is no longer this claim's (CreateRevision %d): deleted or taken over", ErrLost, w.key, w.createRev)
}

// fenced starts a transaction that runs ops only while the claim key is this claim's.
func (w *Worker) fenced(ctx context.Context, ops ...clientv3.Op) clientv3.Txn {
	return w.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(w.key), "=", w.createRev)).Then(ops...)
}

// putMark writes the high-water mark (Unix ms).
func (w *Worker) putMark(ms int64) clientv3.Op {
	return clientv3.OpPut(w.hwKey, strconv.FormatInt(ms, 10))
}

// Store implements snowflake.HighWater: it makes sure the high-water key holds at least mark.
// Usually the keepalives have already stored a higher mark and Store returns at once; else it
// writes the mark, fenced by the claim, within StoreTimeout (and ctx). Errors: ErrLost (final),
// ErrClosed, or etcd's error (the generator then issues nothing past its previous mark).
func (w *Worker) Store(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	w.mu.Lock()
	stored, closed := w.markMillis, w.closed
	w.mu.Unlock()
	switch {
	case w.s.Err() != nil:
		return w.s.Err()
	case closed:
		return ErrClosed
	case ms <= stored:
		w.asked(ms)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
	defer cancel()
	select {
	case w.writeSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("etcdworker: store high-water mark: %w", ctx.Err())
	}
	defer func() { <-w.writeSem }()
	w.mu.Lock()
	stored = w.markMillis
	w.mu.Unlock()
	if ms <= stored {
		w.asked(ms)
		return nil
	}
	asked := ms
	// Write a little further than asked, as the keepalive would, to store less often.
	ms = max(ms, w.opts.wall().Add(w.opts.MarkAhead).UnixMilli())
	tr, err := w.fenced(ctx, w.putMark(ms)).Commit()
	if err != nil {
		return fmt.Errorf("etcdworker: store high-water mark of worker ID %d: %w", w.workerID, err)
	}
	if !tr.Succeeded {
		return w.s.Lose(w.fenceLost())
	}
	w.mu.Lock()
	w.markMillis = max(w.markMillis, ms)
	w.askedMillis = max(w.askedMillis, asked)
	w.mu.Unlock()
	return nil
}

// asked records that a Store for ms succeeded.
func (w *Worker) asked(ms int64) {
	w.mu.Lock()
	w.askedMillis = max(w.askedMillis, ms)
	w.mu.Unlock()
}

// lowerMark sets the high-water key to the highest mark the generator asked for (or the mark
// loaded at claim, if higher), fenced by the claim: the generator, done by now, issued nothing
// at or past it, so the next holder need not wait for the background mark. Best effort: the
// higher mark stays on failure.
func (w *Worker) lowerMark(ctx context.Context) {
	w.mu.Lock()
	mark, stored := max(w.askedMillis, w.floorMillis), w.markMillis
	if w.finalMillis > 0 { // the generator's exact last issued ms + 1 (Seal)
		mark = w.finalMillis
	}
	w.mu.Unlock()
	if mark <= 0 || mark >= stored {
		return
	}
	if _, err := w.fenced(ctx, w.putMark(mark)).Commit(); err != nil {
		w.log.Warn("could not lower the high-water mark at close; the next holder waits for the higher one",
			"err", err, "mark_ms", mark, "stored_ms", stored)
	}
}

// Close stops the keepalives, makes Expiry a past instant (the generator refuses from now on),
// lowers the high-water key to the highest mark the generator asked Store for (every ID it
// issued lies below it; the generator must be done, as snowflake.Source requires) and revokes
// the lease, which deletes the claim key at once: the worker ID is free for the next server.
// The high-water key stays. ctx bounds the revoke. It returns the revoke's error
// (nil when the claim was already lost); later calls return the first call's result.
func (w *Worker) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		if w.s != nil {
			w.s.Stop()
		}
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		lost := w.s != nil && w.s.Err() != nil
		if !lost {
			w.lowerMark(ctx)
			if _, err := w.cli.Revoke(ctx, w.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				// The lease runs out by itself TTL after the last keepalive.
				w.closeErr = fmt.Errorf("etcdworker: revoke lease %s of worker ID %d: %w", leaseHex(w.lease), w.workerID, err)
			} else {
				w.log.Info("released snowflake worker ID (lease revoked)", "key", w.key)
			}
		}
		_ = w.cli.Close()
	})
	return w.closeErr
}

var _ snowflake.FinalHighWater = (*Worker)(nil)

// StoreFinal implements [snowflake.FinalHighWater]: mark (the generator's last issued
// millisecond + 1, given by Generator.Seal at a graceful stop) replaces the highest asked mark
// as what Close lowers the high-water key to before it revokes the lease, so that the next
// holder issues at once instead of waiting up to the mark stored ahead (issue 15 item 6). The
// key is written by Close, fenced by the claim; if that write fails the key keeps its higher
// mark, which only makes the next holder wait. A mark at or below 0 is ignored.
func (w *Worker) StoreFinal(_ context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	if ms <= 0 {
		return nil
	}
	if err := w.s.Err(); err != nil {
		return fmt.Errorf("etcdworker: final mark not stored: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finalMillis = ms
	return nil
}
