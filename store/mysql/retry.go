package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/store"
)

// Error numbers on which a transaction is re-run whole (docs/contract.md §8).
// Each one means that the server rolled the transaction back, or that only
// the statement was rolled back and the store's own rollback undoes the
// rest: nothing was reserved, so running the whole transaction again cannot
// hand out a range twice. Re-running only the failed statement would not be
// safe (the SELECT of a retried transaction must follow its own UPDATE).
const (
	// erWsrepNotReady is ER_UNKNOWN_COM_ERROR, which a Galera node outside
	// the primary component answers ("WSREP has not yet prepared node for
	// application use"). The connection is discarded before the retry, so
	// that a multi-host DSN moves on to another node.
	erWsrepNotReady = 1047
	// erLockWaitTimeout is ER_LOCK_WAIT_TIMEOUT: the row lock was not granted
	// within innodb_lock_wait_timeout. InnoDB rolls back only the statement
	// (unless innodb_rollback_on_timeout is set); the store rolls back the rest.
	erLockWaitTimeout = 1205
	// erLockDeadlock is ER_LOCK_DEADLOCK: an InnoDB deadlock victim, and
	// what Galera answers, often at COMMIT, when certification fails or a
	// replicated write aborts a local transaction ("Deadlock: wsrep aborted
	// transaction").
	erLockDeadlock = 1213
	// tidbForUpdateConflict is TiDB's 8002: a transaction with SELECT … FOR
	// UPDATE met a commit conflict and was rolled back.
	tidbForUpdateConflict = 8002
	// tidbStaleWriteConflict is TiDB's 8005 ("Write Conflict, txnStartTS is
	// stale").
	tidbStaleWriteConflict = 8005
	// tidbTxnRetryable is TiDB's 8022: the commit failed and the transaction
	// was rolled back.
	tidbTxnRetryable = 8022
	// tidbSchemaChanged is TiDB's 8028: the information schema changed
	// during the transaction (a concurrent DDL).
	tidbSchemaChanged = 8028
	// tidbWriteConflict is TiDB's 9007: an optimistic transaction met a write
	// conflict in TiKV at COMMIT and was rolled back.
	tidbWriteConflict = 9007
	// tidbLockRetryLimit is TiDB's 1105, retried only with the message
	// tidbLockRetryLimitMsg: a statement of a pessimistic transaction (or
	// GET_LOCK, which TiDB runs as one) met a write conflict on every one of
	// its pessimistic-txn.max-retry-count re-runs and failed; TiDB rolled
	// the statement back. 1105 is ER_UNKNOWN_ERROR, TiDB's code for any
	// error without a MySQL number of its own, so the number alone says
	// nothing: any other 1105 is not retried.
	tidbLockRetryLimit = 1105
)

// tidbLockRetryLimitMsg is the whole message of TiDB's tidbLockRetryLimit
// error (pkg/executor/adapter.go, handlePessimisticLockError).
const tidbLockRetryLimitMsg = "pessimistic lock retry limit reached"

// retryCodes are the error numbers counted by [Store.RetryStats], in the
// order of Store.retries.
var retryCodes = [...]uint16{
	erWsrepNotReady, erLockWaitTimeout, erLockDeadlock,
	tidbForUpdateConflict, tidbStaleWriteConflict, tidbTxnRetryable, tidbSchemaChanged, tidbWriteConflict,
	tidbLockRetryLimit,
}

// retryCauseNames are the [store.RetryCauses] of retryCodes, index for
// index, then of a lost connection.
var retryCauseNames = [numCauses]string{
	store.RetryNodeNotReady, store.RetryLockWaitTimeout, store.RetryDeadlock,
	store.RetryWriteConflict, store.RetryWriteConflict, store.RetryWriteConflict, store.RetrySchemaChanged, store.RetryWriteConflict,
	store.RetryWriteConflict,
	store.RetryConnection,
}

// causeConn is the RetryStats key, and the retryCause index past
// retryCodes, of a lost connection (retried only with several hosts).
const causeConn = "conn"

// numCauses is the length of Store.retries.
const numCauses = len(retryCodes) + 1

// maxConflictWait bounds how long a transaction is re-run after retryable
// errors; ctx bounds it too (a segment load's LoadTimeout). A time rather
// than a count: with many allocators on one row of a multi-master cluster,
// how many retries a turn takes has no useful bound. As store/postgres.
const maxConflictWait = 10 * time.Second

// retryCause classifies err: the index into Store.retries of its cause, or
// -1 when err must not be retried. A lost connection is a cause when the
// driver says nothing was sent on it (driver.ErrBadConn, which database/sql
// itself retries), and any lost connection or failed dial when multiHost:
// with one host the next attempt would meet the same dead server, and
// failing fast leaves the decision to the caller's backoff. A connection
// lost during COMMIT leaves its outcome unknown; re-running can then only
// leave the first range unused, never hand one out twice. TiDB's catch-all
// 1105 is a cause only with the message tidbLockRetryLimitMsg.
func retryCause(err error, multiHost bool) int {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		if me.Number == tidbLockRetryLimit && me.Message != tidbLockRetryLimitMsg {
			return -1
		}
		for i, c := range retryCodes {
			if me.Number == c {
				return i
			}
		}
		return -1
	}
	if errors.Is(err, driver.ErrBadConn) || (multiHost && lostConn(err)) {
		return len(retryCodes)
	}
	return -1
}

// lostConn reports whether err says that the connection to the server broke
// or could not be made.
func lostConn(err error) bool {
	var ne net.Error
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, errNoHost) || errors.As(err, &ne)
}

// conflictBackoff is the pause before the n-th retry: 1, 2, 4 … ms, at most
// 50 ms, with jitter so that colliding servers spread out. As store/postgres.
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

// inTx runs fn on one pooled connection and re-runs it whole, on a fresh
// connection, while it fails with a retryable error (retryCause), for at
// most maxConflictWait and while ctx lasts. fn must do all its work in a
// transaction of its own that it rolls back on error, so that a failed
// attempt leaves nothing behind, or work that is idempotent (seedWorkers). A connection that failed with a node-level
// or connection error is discarded rather than returned to the pool.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Conn) error) error {
	giveUp := time.Now().Add(maxConflictWait)
	for n := 1; ; n++ {
		var cause int
		conn, err := s.db.Conn(ctx)
		if err == nil {
			err = fn(conn)
			if cause = retryCause(err, s.multiHost); cause == len(retryCodes) || (cause >= 0 && retryCodes[cause] == erWsrepNotReady) {
				// Raw returning ErrBadConn makes database/sql close it.
				// Raw returns that ErrBadConn: nothing else to check.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
			conn.Close()
		} else {
			cause = retryCause(err, s.multiHost)
		}
		if cause < 0 || !time.Now().Before(giveUp) {
			return err
		}
		s.retries[cause].Add(1)
		if err := sleepCtx(ctx, conflictBackoff(n)); err != nil {
			return err
		}
	}
}

// RetryStats returns how many times the store re-ran a transaction, per
// cause, since Open: the keys are the MySQL/MariaDB/TiDB error numbers
// "1047" (Galera node not ready), "1205" (lock wait timeout), "1213"
// (deadlock, Galera certification conflict), "8002", "8005", "8022", "8028",
// "9007" (TiDB conflicts), "1105" (only TiDB's "pessimistic lock retry limit
// reached"), and "conn" (a lost connection: see retryCause). Every key is present, zero or not. Safe for concurrent use.
func (s *Store) RetryStats() map[string]uint64 {
	m := make(map[string]uint64, numCauses)
	for i, c := range retryCodes {
		m[strconv.Itoa(int(c))] = s.retries[i].Load()
	}
	m[causeConn] = s.retries[len(retryCodes)].Load()
	return m
}

// RetryCounts returns how many times the store re-ran a transaction since
// Open, per [store.RetryCauses] name: RetryStats summed by cause (1213 is
// "deadlock", 1205 "lock_wait_timeout", 1047 "node_not_ready", TiDB's 8002,
// 8005, 8022, 9007 and 1105 (pessimistic lock retry limit) "write_conflict",
// 8028 "schema_changed", a lost
// connection "connection"). Every cause this store can meet is present, zero
// or not. api reads it for leaf_store_retries_total. Safe for concurrent use.
func (s *Store) RetryCounts() map[string]uint64 {
	m := make(map[string]uint64, numCauses)
	for i, name := range retryCauseNames {
		m[name] += s.retries[i].Load()
	}
	return m
}

// retryCounters is Store's per-cause retry count, indexed by retryCause.
type retryCounters [numCauses]atomic.Uint64
