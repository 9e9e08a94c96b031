package sqllease_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/snowflake/sqllease"
)

// deleteLeaseRows empties leaf_worker_lease behind the stores' backs: a restore of an old
// dump, an operator's DELETE.
func deleteLeaseRows(t *testing.T, d string) {
	t.Helper()
	ctx := context.Background()
	if path, ok := strings.CutPrefix(d, "sqlite:"); ok {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DELETE FROM leaf_worker_lease"); err != nil {
			t.Fatal(err)
		}
		return
	}
	conn, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DELETE FROM leaf_worker_lease"); err != nil {
		t.Fatal(err)
	}
}

// TestEmptiedTable: the lease table is emptied while A holds worker 0 (generation 1), and B
// claims at once. B gets worker 0 with generation 1 again, the same fencing token as A's, so
// the generation alone cannot tell them apart: A's next renewal must see B's claim (the owner
// column) and lose the lease for good, and B, whose claim found no history, must serve only
// TTL + Margin after its claim, when A has stopped. Before this, A kept renewing B's row and
// both issued IDs with worker 0.
func TestEmptiedTable(t *testing.T) {
	t.Parallel()
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", dbtest.SQLite}, {"postgres", dbtest.Postgres}} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := db.dsn(t)
			st := openLeaseStore(t, d)
			a := start(t, st, with(fast, "srv-a"))
			ga := generator(t, a, snowflake.Layout{})
			if _, err := ga.Next(ctx); err != nil {
				t.Fatal(err)
			}
			deleteLeaseRows(t, d)
			b := start(t, st, with(fast, "srv-b"))
			if b.WorkerID() != a.WorkerID() || b.Generation() != a.Generation() {
				t.Fatalf("B = worker %d generation %d, want A's worker %d generation %d (the case under test)",
					b.WorkerID(), b.Generation(), a.WorkerID(), a.Generation())
			}
			if err := b.Ready(); err == nil || !strings.Contains(err.Error(), "no history") {
				t.Fatalf("B's Ready() right after its claim = %v, want held back: no history", err)
			}
			if exp := b.Expiry(); !exp.Equal(lease.Expired) {
				t.Fatalf("B's Expiry() right after its claim = %v, want %v", exp, lease.Expired)
			}
			select {
			case <-a.Lost():
			case <-time.After(10 * time.Second):
				t.Fatal("A did not lose its lease 10 s after the table was emptied and B claimed worker 0")
			}
			t.Logf("A lost: %v", a.Err())
			if err := a.Err(); !errors.Is(err, lease.ErrLeaseLost) || !errors.Is(err, sqllease.ErrLost) {
				t.Fatalf("A's Err() = %v, want %v and %v", err, lease.ErrLeaseLost, sqllease.ErrLost)
			}
			if _, err := ga.Next(ctx); !errors.Is(err, snowflake.ErrLeaseExpired) {
				t.Fatalf("A's Next() after the loss = %v, want %v", err, snowflake.ErrLeaseExpired)
			}
			gb := generator(t, b, snowflake.Layout{})
			if _, err := gb.Next(ctx); err != nil {
				t.Fatalf("B's Next() after the no-history wait = %v", err)
			}
			if b.State().Lost {
				t.Fatal("B lost its lease to A's renewals")
			}
		})
	}
}
