package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaf-go/leaf/store"
)

// retryCodes are the SQLSTATEs on which a statement is re-run
// (docs/contract.md §8), in the order of Store.retries. Every statement the
// store retries is a single statement in its own transaction, so the
// failed attempt left nothing behind.
//
//   - 40001 serialization_failure: PostgreSQL at SERIALIZABLE or REPEATABLE
//     READ when servers update the row at once; CockroachDB's "restart
//     transaction" errors (every transaction retry error it sends); and
//     YugabyteDB's transaction conflicts and read restarts.
//   - 40P01 deadlock_detected: PostgreSQL's and YugabyteDB's deadlock victim.
//   - 40003 statement_completion_unknown: CockroachDB's "result is
//     ambiguous", when the gateway lost track of a commit. The statement may
//     have committed: re-running it can only leave the first range unused
//     (a gap, never a duplicate), or, for a claim, leave one more worker ID
//     leased to this owner until its TTL expires.
var retryCodes = [...]string{"40001", "40P01", "40003"}

// retryCauseNames are the [store.RetryCauses] of retryCodes, index for
// index.
var retryCauseNames = [len(retryCodes)]string{store.RetryWriteConflict, store.RetryDeadlock, store.RetryAmbiguousCommit}

// retryCounters is Store's per-cause retry count, indexed as retryCodes.
type retryCounters [len(retryCodes)]atomic.Uint64

// maxConflictWait bounds how long a statement is re-run after retryable
// errors; ctx bounds it too (a segment load's LoadTimeout). A time rather
// than a count: with many allocators on one row and a loaded database, how
// many retries a turn takes has no useful bound.
const maxConflictWait = 10 * time.Second

// retryCause returns the index into retryCodes of err's SQLSTATE, or -1 when
// err must not be retried.
func retryCause(err error) int {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return -1
	}
	for i, c := range retryCodes {
		if pgErr.Code == c {
			return i
		}
	}
	return -1
}

// retry runs fn and re-runs it while it fails with a retryable error, for at
// most maxConflictWait and while ctx lasts. fn must be one statement (or
// one transaction of its own).
func (s *Store) retry(ctx context.Context, fn func() error) error {
	giveUp := time.Now().Add(maxConflictWait)
	for n := 1; ; n++ {
		err := fn()
		cause := retryCause(err)
		if cause < 0 || !time.Now().Before(giveUp) {
			return err
		}
		s.retries[cause].Add(1)
		if err := sleepCtx(ctx, conflictBackoff(n)); err != nil {
			return err
		}
	}
}

// RetryStats returns how many times the store re-ran a statement, per
// SQLSTATE, since Open: the keys are "40001" (serialization failure,
// CockroachDB's restart transaction, YugabyteDB's conflicts), "40P01"
// (deadlock) and "40003" (CockroachDB's ambiguous result). Every key is
// present, zero or not. Safe for concurrent use.
func (s *Store) RetryStats() map[string]uint64 {
	m := make(map[string]uint64, len(retryCodes))
	for i, c := range retryCodes {
		m[c] = s.retries[i].Load()
	}
	return m
}

// RetryCounts returns how many times the store re-ran a statement since
// Open, per [store.RetryCauses] name: 40001 is "write_conflict", 40P01
// "deadlock", 40003 "ambiguous_commit". Every cause this store can meet is
// present, zero or not. api reads it for leaf_store_retries_total. Safe for
// concurrent use.
func (s *Store) RetryCounts() map[string]uint64 {
	m := make(map[string]uint64, len(retryCodes))
	for i, name := range retryCauseNames {
		m[name] += s.retries[i].Load()
	}
	return m
}

// conflictBackoff is the pause before the n-th conflict retry: 1, 2, 4 … ms,
// at most 50 ms, with jitter so that colliding servers spread out.
func conflictBackoff(n int) time.Duration {
	d := time.Millisecond << min(n-1, 6)
	d = min(d, 50*time.Millisecond)
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
