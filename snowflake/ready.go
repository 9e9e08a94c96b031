package snowflake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// ErrSealed is returned by Generator.Next after Seal (a graceful shutdown): the exact last
// issued millisecond has been persisted, and issuing more would break that promise. Code -1.
var ErrSealed = errors.New("snowflake: generator sealed for shutdown")

// Ready returns nil when the generator can issue IDs now, and otherwise an error that says why,
// for an operator (/readyz shows it). It checks, without I/O and without blocking on Next:
//   - the source's readiness (Source.Ready: a lost lease, an identity conflict);
//   - the lease (Expiry passed: ErrLeaseExpired);
//   - the clock against the high-water mark loaded at start (ErrClockBehindMark) and against
//     the last issued millisecond beyond MaxBackwardWait (ErrClockBackwards), both as Next
//     would see them;
//   - the last HighWater.Store: failed and not succeeded since (ErrHighWater, e.g. disk full);
//     a failure because the request's context ended does not count;
//   - Seal (ErrSealed).
//
// A nil Ready is no promise that the next Next succeeds (the clock may step, a store may fail
// meanwhile), and a non-nil one clears by itself when its cause does (the clock passes the
// mark, a store succeeds), except for a lost source and Seal.
func (g *Generator) Ready() error {
	if g.src != nil {
		if err := g.src.Ready(); err != nil {
			return err
		}
	}
	// The snapshot first, the clock after it: a reading taken before waiting for mu would be
	// older than IDs that Next issued meanwhile, and look like a clock step back.
	g.mu.Lock()
	floor, last, sealed := g.floorMillis, g.lastMillis, g.sealed
	g.mu.Unlock()
	now := g.clock.Now()
	if g.lease != nil {
		if exp := g.lease.Expiry(); expired(now, exp) {
			if g.src != nil && g.src.Ready() != nil {
				return g.src.Ready() // lost since the check above: its reason says more
			}
			return fmt.Errorf("%w: expired at %s", ErrLeaseExpired, exp.UTC().Format(time.RFC3339Nano))
		}
	}
	ms := now.UnixMilli()
	switch {
	case sealed:
		return ErrSealed
	case ms < floor:
		return fmt.Errorf("%w by %v: no snowflake IDs until the clock passes it", ErrClockBehindMark, millis(floor-ms))
	case last != math.MinInt64 && millis(last-ms) > max(g.maxBackwardWait, 0):
		return fmt.Errorf("%w: the clock is %v behind the last issued ID (more than the %v waited out): "+
			"no snowflake IDs until it passes it", ErrClockBackwards, millis(last-ms), max(g.maxBackwardWait, 0))
	}
	if g.hwWatch != nil {
		if p := g.hwWatch.failure.Load(); p != nil {
			return fmt.Errorf("%w: the last store failed, so no ID past the stored mark can be issued: %w", ErrHighWater, *p)
		}
	}
	return nil
}

// watchedHighWater wraps the generator's HighWater to remember whether the last Store failed,
// for Ready.
type watchedHighWater struct {
	HighWater
	// failure is the last Store's error; nil when it succeeded.
	failure atomic.Pointer[error]
}

// Store stores through the wrapped HighWater and records the outcome. An error while ctx is
// done (a request gave up) is not recorded: it says nothing about the store.
func (w *watchedHighWater) Store(ctx context.Context, mark time.Time) error {
	err := w.HighWater.Store(ctx, mark)
	switch {
	case err == nil:
		w.failure.Store(nil)
	case ctx.Err() == nil:
		w.failure.Store(&err)
	}
	return err
}
