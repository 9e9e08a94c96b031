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
	"github.com/leaf-go/leaf/store/mysql"
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

// waitLockWait waits until a transaction on db's database (the server may
// run other tests' databases) waits for a row lock, or at most 3 s: on a
// loaded machine the information_schema tables do not always show the wait
// in time, and the tests' RetryStats checks catch an operation that never
// waited. It fails the test when ended (which the caller closes when the
// operation that should wait has returned) is closed first.
func waitLockWait(t *testing.T, db *sql.DB, ended <-chan struct{}) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case <-ended:
			t.Fatal("the operation returned without waiting for the row lock")
		default:
		}
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX t
			JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
}

// waitRetried waits until s has re-run a transaction for the error number
// code at least once, or at most 8 s (the store retries for 10 s): the
// caller's RetryStats check reports a retry that never came. A fixed sleep
// past innodb_lock_wait_timeout is not enough on a loaded server.
func waitRetried(s *mysql.Store, code string) {
	for deadline := time.Now().Add(8 * time.Second); s.RetryStats()[code] < 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
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
	done, ended := make(chan result, 1), make(chan struct{})
	go func() {
		a, err := s.Allocate(ctx, "t", 0, 0)
		done <- result{a, err}
		close(ended)
	}()
	waitLockWait(t, db, ended)
	waitRetried(s, "1205") // past innodb_lock_wait_timeout: one 1205 at least
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

// TestRetryDeadlock provokes a real deadlock (1213, what Galera also
// answers on a certification conflict): a trigger in the test database
// makes every allocation also update a row of a table "gate". Another
// transaction holds that row; the store's transaction, holding the tag's
// row, waits for it; the other transaction then updates the tag's row too.
// InnoDB breaks the cycle by rolling back the store's transaction (the
// lighter one: the other has written 200 rows more). The store re-runs it
// whole and gets the range after the other transaction's.
func TestRetryDeadlock(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQL(t)
	s := open(t, dsn)
	if err := s.Create(ctx, store.Row{BizTag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dsn)
	for _, q := range []string{
		`CREATE TABLE ballast (id INT PRIMARY KEY)`,
		`CREATE TABLE gate (id INT PRIMARY KEY, n INT NOT NULL)`,
		`INSERT INTO gate VALUES (1, 0)`,
		`CREATE TRIGGER leaf_gate AFTER UPDATE ON leaf_alloc FOR EACH ROW UPDATE gate SET n = n + 1 WHERE id = 1`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
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
	if _, err := tx.Exec(`UPDATE gate SET n = n + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	done, ended := make(chan result, 1), make(chan struct{})
	go func() {
		a, err := s.Allocate(ctx, "t", 0, 0)
		done <- result{a, err}
		close(ended)
	}()
	waitLockWait(t, db, ended)
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
	l, err := s.ClaimWorker(ctx, store.Claim{Owner: "a", MaxWorker: 3, TTL: time.Minute})
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
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		_, err := s.RenewWorker(ctx, l.WorkerID, l.Generation, time.Minute, 42, 0)
		done <- err
		close(ended)
	}()
	waitLockWait(t, db, ended)
	waitRetried(s, "1205")
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
