package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
)

// rawDB opens dsn (leaf-go's mysql:// form) with database/sql for the
// test's own transactions.
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", strings.TrimPrefix(dsn, "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// withParam adds a go-sql-driver parameter (a session variable) to dsn.
func withParam(dsn, param string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + param
	}
	return dsn + "?" + param
}

// waitLockWait waits until some transaction of the database waits for a row
// lock.
func waitLockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no transaction started waiting for the row lock")
}

type result struct {
	a   store.Allocation
	err error
}

// TestRetryLockWaitTimeout: another transaction holds the row lock longer
// than innodb_lock_wait_timeout (1 s here), so the store's UPDATE fails with
// 1205. The store re-runs the whole transaction and gets a range of its own,
// after the one the other transaction took.
func TestRetryLockWaitTimeout(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQL(t)
	s := open(t, withParam(dsn, "innodb_lock_wait_timeout=1"))
	if err := s.Create(ctx, store.Row{BizTag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dsn)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 't'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() {
		a, err := s.Allocate(ctx, "t", 0)
		done <- result{a, err}
	}()
	waitLockWait(t, db)
	time.Sleep(1500 * time.Millisecond) // past innodb_lock_wait_timeout: one 1205 at least
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.a.Start() != 11 || r.a.MaxID != 21 {
		t.Fatalf("Allocate() = %+v, %v, want [11, 21) after the other transaction's [1, 11)", r.a, r.err)
	}
	if n := s.RetryStats()["1205"]; n < 1 {
		t.Errorf(`RetryStats()["1205"] = %d, want >= 1`, n)
	}
}

// TestRetryDeadlock: another transaction holds a shared lock on the row, the
// store's UPDATE queues for the exclusive lock, and the other transaction
// then updates the row too: InnoDB breaks the cycle by rolling back the
// store's transaction (the lighter one: the other has written rows) with
// 1213, as Galera does at COMMIT on a certification conflict. The store
// re-runs it whole and gets a range after the other transaction's.
func TestRetryDeadlock(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQL(t)
	s := open(t, dsn)
	if err := s.Create(ctx, store.Row{BizTag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dsn)
	if _, err := db.Exec(`CREATE TABLE ballast (id INT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// Weight: InnoDB picks the transaction that changed fewer rows as the
	// deadlock victim.
	var b strings.Builder
	b.WriteString("INSERT INTO ballast VALUES ")
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d)", i)
	}
	if _, err := tx.Exec(b.String()); err != nil {
		t.Fatal(err)
	}
	var maxID int64
	if err := tx.QueryRow(`SELECT max_id FROM leaf_alloc WHERE biz_tag = 't' LOCK IN SHARE MODE`).Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() {
		a, err := s.Allocate(ctx, "t", 0)
		done <- result{a, err}
	}()
	waitLockWait(t, db)
	if _, err := tx.Exec(`UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 't'`); err != nil {
		var me *gomysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 {
			t.Fatalf("InnoDB chose the test's transaction as the deadlock victim: %v", err)
		}
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.a.Start() != 11 || r.a.MaxID != 21 {
		t.Fatalf("Allocate() = %+v, %v, want [11, 21) after the other transaction's [1, 11)", r.a, r.err)
	}
	if n := s.RetryStats()["1213"]; n < 1 {
		t.Errorf(`RetryStats()["1213"] = %d, want >= 1`, n)
	}
}

// TestRetryLeaseLockWaitTimeout: RenewWorker meets a 1205 while another
// transaction holds its lease row, and is re-run whole.
func TestRetryLeaseLockWaitTimeout(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQL(t)
	s := open(t, withParam(dsn, "innodb_lock_wait_timeout=1"))
	l, err := s.ClaimWorker(ctx, "a", 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dsn)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRow(`SELECT worker_id FROM leaf_worker_lease WHERE worker_id = ? FOR UPDATE`, l.WorkerID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.RenewWorker(ctx, l.WorkerID, l.Generation, time.Minute, 42)
		done <- err
	}()
	waitLockWait(t, db)
	time.Sleep(1500 * time.Millisecond)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RenewWorker() = %v, want nil", err)
	}
	if n := s.RetryStats()["1205"]; n < 1 {
		t.Errorf(`RetryStats()["1205"] = %d, want >= 1`, n)
	}
}
