package api_test

import (
	"context"
	"database/sql"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// retriesOf reads leaf_store_retries_total{cause=cause} from an exposition,
// and whether the series is there.
func retriesOf(t *testing.T, exposition, cause string) (float64, bool) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^leaf_store_retries_total\{cause="` + regexp.QuoteMeta(cause) + `"\} (\S+)$`)
	m := re.FindStringSubmatch(exposition)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("leaf_store_retries_total{cause=%q} = %q: %v", cause, m[1], err)
	}
	return v, true
}

// checkRetryMetric fetches /metrics over HTTP and checks that the series of
// every cause is there, that cause counted at least one retry, and that
// promtool accepts the exposition.
func checkRetryMetric(t *testing.T, s *opsServer, cause string) {
	t.Helper()
	got := s.get(t, "/metrics")
	if got.status != 200 {
		t.Fatalf("GET /metrics = %d", got.status)
	}
	for _, c := range store.RetryCauses() {
		v, ok := retriesOf(t, got.body, c)
		switch {
		case !ok:
			t.Errorf("/metrics lacks leaf_store_retries_total{cause=%q}:\n%s", c, grepLines(got.body, "leaf_store_retries"))
		case c == cause && v < 1:
			t.Errorf("leaf_store_retries_total{cause=%q} = %v, want >= 1", c, v)
		}
	}
	promtoolCheck(t, got.body)
}

// getAsync requests an ID of tag over HTTP in a goroutine; the channel
// receives the answer.
func getAsync(t *testing.T, s *opsServer, tag string) <-chan answer {
	done := make(chan answer, 1)
	go func() { done <- do(t, "GET", s.srv.URL+"/api/segment/get/"+tag) }()
	return done
}

// TestStoreRetryMetricPostgres: at REPEATABLE READ the allocation's UPDATE
// waits for another transaction's lock on the tag's row; that transaction
// commits a change of the row, so PostgreSQL refuses the UPDATE with 40001
// (as CockroachDB and YugabyteDB refuse conflicting writes). The store
// re-runs it, the request over HTTP gets the ID after the other
// transaction's range, and /metrics counts one write_conflict at least.
func TestStoreRetryMetricPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// %20, not the + of url.Values.Encode: pgx reads + literally.
	u.RawQuery += "&default_transaction_isolation=repeatable%20read"
	s := newOpsServer(t, u.String(), segment.Config{WaitTimeout: 30 * time.Second}, store.Row{BizTag: "t", MaxID: 1, Step: 10})
	if v, ok := retriesOf(t, s.get(t, "/metrics").body, store.RetryWriteConflict); !ok || v != 0 {
		t.Fatalf("leaf_store_retries_total{cause=%q} before any conflict = %v (found %v), want 0", store.RetryWriteConflict, v, ok)
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
	if _, err := tx.Exec(ctx, `UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 't'`); err != nil {
		t.Fatal(err)
	}
	done := getAsync(t, s, "t")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the allocation never waited for the row lock")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The other transaction took [1, 11): the re-run allocation gets [11, 21).
	if got := <-done; got.status != 200 || got.body != "11" {
		t.Fatalf("GET /api/segment/get/t = %d %q, want 200 \"11\"", got.status, got.body)
	}
	checkRetryMetric(t, s, store.RetryWriteConflict)
}

// TestStoreRetryMetricMySQL: another transaction holds the tag's row lock
// longer than innodb_lock_wait_timeout (1 s here), so the allocation's
// UPDATE fails with 1205; the store re-runs the whole transaction, the
// request over HTTP gets the ID after the other transaction's range, and
// /metrics counts one lock_wait_timeout at least.
func TestStoreRetryMetricMySQL(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQL(t)
	s := newOpsServer(t, dsn+"?innodb_lock_wait_timeout=1", segment.Config{WaitTimeout: 30 * time.Second}, store.Row{BizTag: "t", MaxID: 1, Step: 10})
	db, err := sql.Open("mysql", strings.TrimPrefix(dsn, "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 't'`); err != nil {
		t.Fatal(err)
	}
	done := getAsync(t, s, "t")
	// Hold the lock until the store has counted a 1205 (each attempt waits
	// 1 s), or at most 20 s.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if v, _ := retriesOf(t, s.get(t, "/metrics").body, store.RetryLockWaitTimeout); v >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no lock_wait_timeout retry counted while the row was locked for 20 s")
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.status != 200 || got.body != "11" {
		t.Fatalf("GET /api/segment/get/t = %d %q, want 200 \"11\"", got.status, got.body)
	}
	checkRetryMetric(t, s, store.RetryLockWaitTimeout)
}

// TestStoreRetryMetricAbsent: a store that does not retry (SQLite) adds no
// leaf_store_retries_total series.
func TestStoreRetryMetricAbsent(t *testing.T) {
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{}, demo)
	if got := s.get(t, "/metrics").body; strings.Contains(got, "leaf_store_retries_total") {
		t.Errorf("/metrics on SQLite has leaf_store_retries_total:\n%s", grepLines(got, "leaf_store_retries"))
	}
}
