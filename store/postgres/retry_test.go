package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
)

// TestRetryLeaseSerialization: at REPEATABLE READ, RenewWorker's UPDATE
// waits for another transaction's lock on its row; that transaction commits
// a change of the row, so PostgreSQL refuses the UPDATE with 40001 (as
// CockroachDB and YugabyteDB refuse conflicting writes). RenewWorker re-runs
// it and succeeds.
func TestRetryLeaseSerialization(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// %20, not the + of url.Values.Encode: pgx reads + literally.
	u.RawQuery += "&default_transaction_isolation=repeatable%20read"
	s := open(t, u.String())
	l, err := s.ClaimWorker(ctx, store.Claim{Owner: "a", MaxWorker: 3, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // ErrTxClosed after Commit, by design
	if _, err := tx.Exec(ctx, `UPDATE leaf_worker_lease SET updated_at = now() WHERE worker_id = $1`, l.WorkerID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.RenewWorker(ctx, l.WorkerID, l.Generation, time.Minute, 42, 0)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("RenewWorker never waited for the row lock")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RenewWorker() = %v, want nil", err)
	}
	if n := s.RetryStats()["40001"]; n < 1 {
		t.Errorf(`RetryStats()["40001"] = %d, want >= 1`, n)
	}
}
