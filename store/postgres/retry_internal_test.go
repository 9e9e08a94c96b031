package postgres

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaf-go/leaf/store"
)

// TestRetryCause covers what the PostgreSQL-protocol engines send, as
// their documentation gives it: the classifier reads only the SQLSTATE,
// and the message says which engine and which case it stands for.
// CockroachDB: every transaction retry error is 40001 with "restart
// transaction" (its "Transaction retry error reference"); an ambiguous
// commit is 40003. YugabyteDB (YSQL "Transaction error codes" and
// "Transaction retries"): conflicts and read restarts are 40001, deadlocks
// 40P01.
func TestRetryCause(t *testing.T) {
	pg := func(code, msg string) error {
		return fmt.Errorf("allocate %q: %w", "t", &pgconn.PgError{Code: code, Message: msg})
	}
	tests := []struct {
		name string
		give error
		want string // RetryStats key, "" for no retry
	}{
		{"nil", nil, ""},
		{"postgres serialization failure", pg("40001", "could not serialize access due to concurrent update"), "40001"},
		{"postgres deadlock", pg("40P01", "deadlock detected"), "40P01"},
		{"cockroach write too old", pg("40001", "restart transaction: TransactionRetryWithProtoRefreshError: WriteTooOldError: write for key /Table/104/1/\"t\"/0 at timestamp 1700000000.000000000,0 too old; must write at or above 1700000000.000000001,1"), "40001"},
		{"cockroach serializable", pg("40001", "restart transaction: TransactionRetryWithProtoRefreshError: TransactionRetryError: retry txn (RETRY_SERIALIZABLE - failed preemptive refresh)"), "40001"},
		{"cockroach uncertainty", pg("40001", "restart transaction: TransactionRetryWithProtoRefreshError: ReadWithinUncertaintyIntervalError: read at time 1700000000.000000000,0 encountered previous write with future timestamp"), "40001"},
		{"cockroach aborted", pg("40001", "restart transaction: TransactionRetryWithProtoRefreshError: TransactionAbortedError(ABORT_REASON_ABORTED_RECORD_FOUND)"), "40001"},
		{"cockroach ambiguous result", pg("40003", "result is ambiguous: error=rpc error: code = Unavailable desc = transport is closing [propagate]"), "40003"},
		{"yugabyte conflict", pg("40001", "could not serialize access due to concurrent update"), "40001"},
		{"yugabyte read restart", pg("40001", "Restart read required at: { read: { physical: 1700000000000000 } local_limit: { physical: 1700000000000500 } }"), "40001"},
		{"yugabyte deadlock", pg("40P01", "deadlock detected"), "40P01"},
		{"duplicate key", pg("23505", "duplicate key value violates unique constraint"), ""},
		{"read-only transaction (a standby)", pg("25006", "cannot execute UPDATE in a read-only transaction"), ""},
		{"deferred constraint at commit", pg("40002", "transaction_integrity_constraint_violation"), ""},
		{"cockroach schema change failure at commit", pg("XXA00", "transaction committed but schema change aborted"), ""},
		{"yugabyte internal conflict code", pg("YB003", "Transaction aborted"), ""},
		{"out of range", pg("22003", "integer out of range"), ""},
		{"admin shutdown", pg("57P01", "terminating connection due to administrator command"), ""},
		{"not a server error", errors.New("boom"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if i := retryCause(tt.give); i >= 0 {
				got = retryCodes[i]
			}
			if got != tt.want {
				t.Errorf("retryCause(%v) = %q, want %q", tt.give, got, tt.want)
			}
		})
	}
}

// TestRetryCounts: RetryStats summed per store.RetryCauses name.
func TestRetryCounts(t *testing.T) {
	var s Store
	s.retries[0].Add(7)
	s.retries[1].Add(2)
	s.retries[2].Add(1)
	want := map[string]uint64{store.RetryWriteConflict: 7, store.RetryDeadlock: 2, store.RetryAmbiguousCommit: 1}
	if got := s.RetryCounts(); !maps.Equal(got, want) {
		t.Errorf("RetryCounts() = %v, want %v", got, want)
	}
	if got := s.RetryStats(); got["40001"] != 7 || got["40P01"] != 2 || got["40003"] != 1 || len(got) != 3 {
		t.Errorf("RetryStats() = %v, want 40001: 7, 40P01: 2, 40003: 1", got)
	}
}
