package faults

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
	mysqlstore "github.com/leaf-go/leaf/store/mysql"
	"github.com/leaf-go/leaf/store/storetest"
)

// TestTiDB runs leaf-go against the TiDB server of LEAF_TEST_TIDB_DSN (a
// mysql:// DSN of a TiDB server whose user may create databases and set
// global variables; `make tidb` builds tidb-server, starts it on unistore
// on loopback and sets it). It is not part of `make test` and skips unless
// LEAF_TEST_TIDB_DSN is set, even with CI=true. In each transaction mode
// (SET GLOBAL tidb_txn_mode: pessimistic, TiDB's default, then optimistic):
//
//   - the store conformance suites (storetest.Run, storetest.RunLease) on a
//     fresh database;
//   - many servers: 3 leaf-servers on one database, steps 1, 10 and 1000,
//     3 clients per server for 4 s; 0 errors and 0 duplicates, every ID
//     below the final max_id. TiDB has no triggers, so there is no audit of
//     committed ranges here; the retries the servers made are read from
//     their /metrics (leaf_store_retries_total). Right after each row the
//     same load runs on 3 leaf-servers sharing one database of the local
//     MariaDB (LEAF_TEST_MYSQL_DSN): the baseline of BENCHMARKS.md's TiDB
//     rows (IDs per second, same run);
//   - the SQL lease claim: 16 claimers at once, each on a store of its own,
//     claim worker IDs of 0..1023: 16 leases, 16 distinct worker IDs.
//
// The rows go into the fault campaign's report (LEAF_FAULTS_REPORT), the
// source of RELIABILITY.md's TiDB table.
func TestTiDB(t *testing.T) {
	base := os.Getenv("LEAF_TEST_TIDB_DSN")
	if base == "" {
		t.Skip("LEAF_TEST_TIDB_DSN is not set: `make tidb` builds tidb-server, starts it on loopback and runs this test (not part of `make test`)")
	}
	servertest.SkipShort(t)
	admin := openRaw(t, "mysql", strings.TrimPrefix(base, "mysql://"))
	var version string
	if err := admin.QueryRow(`SELECT tidb_version()`).Scan(&version); err != nil {
		t.Fatalf("LEAF_TEST_TIDB_DSN %s: SELECT tidb_version(): %v (is it a TiDB server?)", dsn.Redact(base), err)
	}
	t.Logf("TiDB: %s", strings.ReplaceAll(version, "\n", "; "))
	for _, mode := range []string{"pessimistic", "optimistic"} {
		t.Run(mode, func(t *testing.T) {
			setGlobal(t, admin, "tidb_txn_mode", mode)
			t.Cleanup(func() { setGlobal(t, admin, "tidb_txn_mode", "pessimistic") })
			t.Run("conformance", func(t *testing.T) {
				storetest.Run(t, func(t *testing.T) store.Store { return openStore(t, tidbDB(t, admin, base)) })
			})
			t.Run("lease-conformance", func(t *testing.T) {
				storetest.RunLease(t, func(t *testing.T) store.LeaseStore { return openStore(t, tidbDB(t, admin, base)) })
			})
			t.Run("many-servers", func(t *testing.T) { tidbManyServers(t, tidbDB(t, admin, base), mode) })
			t.Run("lease-claim", func(t *testing.T) { tidbLeaseClaim(t, tidbDB(t, admin, base), mode) })
		})
	}
}

// setGlobal sets a global variable of the TiDB server; it applies to the
// sessions opened afterwards.
func setGlobal(t *testing.T, admin *sql.DB, name, value string) {
	t.Helper()
	if _, err := admin.Exec(`SET GLOBAL `+name+` = ?`, value); err != nil {
		t.Fatalf("SET GLOBAL %s = %q: %v", name, value, err)
	}
}

// tidbDB creates a fresh database on the TiDB server of base, dropped in
// t.Cleanup, and returns its mysql:// DSN.
func tidbDB(t *testing.T, admin *sql.DB, base string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(strings.TrimPrefix(base, "mysql://"))
	if err != nil {
		t.Fatalf("LEAF_TEST_TIDB_DSN must be mysql://user:pass@tcp(host:port)/db: %v", err)
	}
	cfg.DBName = fmt.Sprintf("leaf_tidb_%d_%d", os.Getpid(), tidbSeq.Add(1))
	if _, err := admin.Exec(`CREATE DATABASE ` + cfg.DBName); err != nil {
		t.Fatalf("create database %s: %v", cfg.DBName, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(`DROP DATABASE IF EXISTS ` + cfg.DBName); err != nil {
			t.Errorf("drop database %s: %v", cfg.DBName, err)
		}
	})
	return "mysql://" + cfg.FormatDSN()
}

// tidbSeq numbers the databases of one test process.
var tidbSeq atomic.Int64

// openStore opens the store of dsnStr, migrated, closed in t.Cleanup.
func openStore(t *testing.T, dsnStr string) *mysqlstore.Store {
	t.Helper()
	c, err := dsn.Parse(dsnStr)
	if err != nil || c.Dialect != dsn.MySQL {
		t.Fatalf("open %s: %v, want a mysql:// DSN", dsn.Redact(dsnStr), err)
	}
	ms, err := mysqlstore.Open(context.Background(), c.DSN, true)
	if err != nil {
		t.Fatalf("open %s: %v", dsn.Redact(dsnStr), err)
	}
	t.Cleanup(func() { ms.Close() })
	return ms
}

// tidbManyServers: 3 leaf-servers on one database, steps 1, 10 and 1000, 3
// clients per server for 4 s each.
func tidbManyServers(t *testing.T, dbDSN, mode string) {
	st := openStore(t, dbDSN)
	d := &db{kind: "mysql", direct: dbDSN, raw: openRaw(t, "mysql", strings.TrimPrefix(dbDSN, "mysql://")), st: st}
	const wait = time.Second
	servers := make([]*servertest.Proc, 3)
	for i := range servers {
		servers[i] = start(t, t.TempDir(), "--segment-dsn", dbDSN, "--migrate=false", "--snowflake=false", "--wait-timeout", wait.String())
	}
	// leaf-server warns at start about optimistic mode (store/mysql
	// engine.go); the log line is written before it listens.
	if warned := strings.Contains(servers[0].Logs(), "tidb_txn_mode=optimistic"); warned != (mode == "optimistic") {
		t.Errorf("leaf-server in %s mode warned about optimistic transactions: %v, want %v; logs:\n%s", mode, warned, mode == "optimistic", servers[0].Logs())
	}
	base := newDB(t, "mysql")
	baseServers := make([]*servertest.Proc, 3)
	for i := range baseServers {
		baseServers[i] = start(t, t.TempDir(), "--segment-dsn", base.direct, "--migrate=false", "--snowflake=false", "--wait-timeout", wait.String())
	}
	const run = 4 * time.Second
	for _, step := range []int64{1, 10, 1000} {
		tag := "many" + strconv.FormatInt(step, 10)
		d.create(t, tag, 1, step)
		base.create(t, tag, 1, step)
		before := serverRetries(t, servers)
		tl := loadFor(servers, tag, 3, run, wait)
		after := serverRetries(t, servers)
		bl := loadFor(baseServers, tag, 3, run, wait)
		r := check(t, tl, nil, tag) // no triggers on TiDB: no audit of committed ranges
		if len(r.Errors) > 0 {
			t.Errorf("step %d: errors %v, want none", step, r.Errors)
		}
		rb := check(t, bl, base, tag)
		ratio := float64(r.IDs) / float64(max(rb.IDs, 1))
		t.Logf("step %d: TiDB (%s) %d IDs in %v (%.0f/s), one MariaDB %d IDs (%.0f/s): TiDB/MariaDB = %.2f",
			step, mode, r.IDs, run, float64(r.IDs)/run.Seconds(), rb.IDs, float64(rb.IDs)/run.Seconds(), ratio)
		maxID := d.maxID(t, tag)
		ids, _, _, _ := tl.snapshot()
		for _, id := range ids {
			if id < 1 || id >= maxID {
				t.Errorf("step %d: ID %d outside [1, max_id %d)", step, id, maxID)
				break
			}
		}
		var retries []string
		var total uint64
		for _, c := range store.RetryCauses() {
			if n := after[c] - before[c]; n > 0 {
				retries = append(retries, fmt.Sprintf("%s %d", c, n))
				total += n
			}
		}
		if len(retries) == 0 {
			retries = []string{"none"}
		}
		perM := 0.0
		if r.IDs > 0 {
			perM = float64(total) / float64(r.IDs) * 1e6
		}
		r.Scenario = "12 TiDB (" + mode + "): many servers"
		r.Size = fmt.Sprintf("3 servers on one TiDB (unistore), step %d, 3 clients per server, %v", step, run)
		r.Recovery = "n/a"
		r.Note = fmt.Sprintf("max_id %d; transactions re-run: %d (%s; %.0f per 10^6 IDs); no audit (TiDB has no triggers): every ID below max_id; "+
			"baseline 3 servers on one MariaDB: %d IDs (TiDB/MariaDB = %.2f)",
			maxID, total, strings.Join(retries, ", "), perM, rb.IDs, ratio)
		r.Cmd = "make tidb"
		report.add(t, r)
	}
}

// retriesRe matches one series of leaf_store_retries_total.
var retriesRe = regexp.MustCompile(`(?m)^leaf_store_retries_total\{cause="([a-z_]+)"\} (\S+)$`)

// serverRetries sums leaf_store_retries_total per cause over the servers'
// /metrics.
func serverRetries(t *testing.T, servers []*servertest.Proc) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, p := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		status, body, err := p.Get(ctx, "/metrics")
		cancel()
		if err != nil || status != 200 {
			t.Fatalf("GET /metrics = %d, %v", status, err)
		}
		ms := retriesRe.FindAllStringSubmatch(body, -1)
		if len(ms) == 0 {
			t.Fatalf("/metrics has no leaf_store_retries_total")
		}
		for _, m := range ms {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatalf("leaf_store_retries_total{cause=%q} = %q: %v", m[1], m[2], err)
			}
			out[m[1]] += uint64(v)
		}
	}
	return out
}

// tidbLeaseClaim: 16 claimers at once, each on a store of its own (its own
// connections, so its own TiDB sessions), claim a worker ID of 0..1023.
func tidbLeaseClaim(t *testing.T, dbDSN, mode string) {
	const claimers = 16
	stores := make([]*mysqlstore.Store, claimers)
	for i := range stores {
		stores[i] = openStore(t, dbDSN)
	}
	leases := make([]store.Lease, claimers)
	errs := make([]error, claimers)
	var ready, wg sync.WaitGroup
	ready.Add(claimers)
	gate := make(chan struct{})
	for i := range claimers {
		wg.Go(func() {
			ready.Done()
			<-gate
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			leases[i], errs[i] = stores[i].ClaimWorker(ctx, store.Claim{Owner: fmt.Sprintf("claimer-%d", i), MaxWorker: 1023, TTL: time.Minute})
		})
	}
	ready.Wait()
	close(gate)
	wg.Wait()
	seen := map[int64]int{} // worker ID → claimer
	failed := map[string]int{}
	dups := 0
	for i, err := range errs {
		if err != nil {
			failed[err.Error()]++
			continue
		}
		if j, dup := seen[leases[i].WorkerID]; dup {
			t.Errorf("worker ID %d leased to claimer-%d and claimer-%d", leases[i].WorkerID, j, i)
			dups++
		}
		seen[leases[i].WorkerID] = i
	}
	for e, n := range failed {
		t.Errorf("%d claims failed: %s", n, e)
	}
	var retries uint64
	for _, s := range stores {
		for _, n := range s.RetryCounts() {
			retries += n
		}
	}
	report.add(t, row{
		Scenario: "12 TiDB (" + mode + "): SQL lease claim",
		Size:     fmt.Sprintf("%d concurrent claimers, worker IDs 0..1023", claimers),
		IDs:      len(seen),
		Dups:     dups,
		Errors:   failed,
		Recovery: "n/a",
		Note:     fmt.Sprintf("%d distinct worker IDs from %d claims; %d statements re-run", len(seen), claimers, retries),
		Cmd:      "make tidb",
	})
}
