package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbproctest"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestDatabaseRestart: the database process itself goes away and comes
// back, on a private PostgreSQL or MariaDB started for the test
// (internal/dbproctest; the shared servers are never touched). Two servers share
// it, 4 clients each. Faults: a clean stop (PostgreSQL's fast shutdown,
// MariaDB's SIGTERM) and kill -9 of every database process while an
// allocation is in flight (a BEFORE UPDATE trigger sleeps 150 ms in the
// allocating transaction, and the kill waits until the buffers API shows a
// load after the first one); each once shorter than the buffered runway
// (down ~0.3 s plus the restart, step 10,000) and once longer (down until
// the first -3, then 1 s more, step 100). The servers must serve from their
// buffers while the database is down, only from ranges committed before it
// went down (a second trigger stamps every committed UPDATE with the
// database's clock), answer -3 within --wait-timeout once the runway is
// spent, and recover by themselves through new pool connections.
func TestDatabaseRestart(t *testing.T) {
	t.Parallel()
	const wait = 500 * time.Millisecond
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srv := dbproctest.New(t, dbproctest.Kind(kind))
			d := privateDB(t, srv)
			phases := []struct {
				tag, fault string
				step       int64
				long       bool
			}{
				{"stopshort", "stop", 10_000, false},
				{"stoplong", "stop", 100, true},
				{"killshort", "kill", 10_000, false},
				{"killlong", "kill", 100, true},
			}
			for _, ph := range phases {
				d.create(t, ph.tag, 1, ph.step)
			}
			installCommitTimes(t, d, "kill")
			var servers []*servertest.Proc
			for range 2 {
				servers = append(servers, start(t, t.TempDir(), "--segment-dsn", srv.DSN(), "--migrate=false",
					"--snowflake=false", "--wait-timeout", wait.String()))
			}
			name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
			for _, ph := range phases {
				tl := newTally(wait+slack, 10*time.Second)
				var targets []target
				for _, p := range servers {
					for range 4 {
						targets = append(targets, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/" + ph.tag, tally: tl})
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Go(func() { drive(ctx, targets) })
				midLoad := ""
				if ph.fault == "stop" {
					time.Sleep(time.Second) // healthy warm-up
				} else {
					// Both servers past their first load, then a kill while
					// one of them waits on a later allocation (150 ms in the
					// trigger).
					for _, p := range servers {
						waitInit(t, p, ph.tag, 10*time.Second)
					}
					midLoad = "no load seen in flight at the kill"
					if i := waitLoadingAny(servers, ph.tag, 10*time.Second); i >= 0 {
						midLoad = fmt.Sprintf("server %d had a load in flight at the kill", i)
					}
				}
				tl.startFault()
				t0 := time.Now()
				if ph.fault == "stop" {
					srv.Stop(t)
				} else {
					srv.Kill9(t)
				}
				downAt := time.Now()
				n0 := tl.idCount()
				var runway time.Duration
				if ph.long {
					runway = tl.waitFirstErr(t, 60*time.Second)
					time.Sleep(time.Second)
				} else {
					time.Sleep(300 * time.Millisecond)
				}
				n1 := tl.idCount()
				srv.Start(t)
				down := time.Since(t0)
				tl.endFault()
				rec := tl.waitRecovered(t, time.Second, 30*time.Second)
				cancel()
				wg.Wait()

				// While the database was down, every ID came from a range
				// committed before it went down.
				ids, _, _, _ := tl.snapshot()
				ceiling := d.committedBefore(t, ph.tag, downAt)
				for _, id := range ids[n0:n1] {
					if id >= ceiling {
						t.Errorf("%s: ID %d served while the database was down, but the last range committed before it went down ended at %d", ph.tag, id, ceiling)
						break
					}
				}
				if ph.long {
					// Recovery took new allocations: leaf_alloc_at must place
					// them after the fault, or the check above proves nothing.
					if m := d.maxID(t, ph.tag); ceiling >= m {
						t.Errorf("%s: leaf_alloc_at puts every range before the fault (up to %d, max_id now %d)", ph.tag, ceiling, m)
					}
				}
				r := check(t, tl, d, ph.tag)
				if !ph.long && n1 == n0 {
					t.Errorf("%s: no ID served from the buffers while the database was down", ph.tag)
				}
				if ph.long && r.Errors["500 -3"] == 0 {
					t.Errorf("%s: the database was down past the runway but no request failed with -3", ph.tag)
				}
				r.Scenario = "2 database process restarted"
				what := map[string]string{"stop": "clean stop", "kill": "kill -9 of every database process during an allocation (+150 ms in a trigger)"}[ph.fault]
				if kind == "postgres" && ph.fault == "stop" {
					what = "clean stop (fast shutdown, as pg_ctl stop -m fast)"
				}
				if ph.long {
					r.Size = fmt.Sprintf("%s (private), %s: runway %v spent, then 1s more; down %v in all; step %d, 2 servers",
						name, what, runway.Round(time.Millisecond), down.Round(time.Millisecond), ph.step)
				} else {
					r.Size = fmt.Sprintf("%s (private), %s, shorter than the runway: down %v in all; step %d, 2 servers",
						name, what, down.Round(time.Millisecond), ph.step)
				}
				r.Recovery = fmtRecovery(rec)
				r.Cmd = "go test -race -count=1 -run '^TestDatabaseRestart$/^" + kind + "$' ./faults/"
				r.Note = fmt.Sprintf("%d IDs served from the buffers while down", n1-n0)
				if midLoad != "" {
					r.Note += "; " + midLoad
				}
				report.add(t, r)
			}
		})
	}
}

// privateDB is a db on a dbproc server: leaf_alloc migrated, the audit
// trigger installed. raw keeps no idle connection, so that every read after
// a restart opens a fresh one.
func privateDB(t testing.TB, srv *dbproctest.Server) *db {
	t.Helper()
	d := &db{kind: string(srv.Kind()), direct: srv.DSN()}
	driver, src := "pgx", d.direct
	if d.kind == "mysql" {
		driver, src = "mysql", strings.TrimPrefix(d.direct, "mysql://")
	}
	d.raw = openRaw(t, driver, src)
	d.raw.SetMaxIdleConns(0)
	st, err := dsn.Open(context.Background(), d.direct, true)
	if err != nil {
		t.Fatalf("open %s: %v", dsn.Redact(d.direct), err)
	}
	t.Cleanup(func() { st.Close() })
	d.st = st
	dbtest.InstallAudit(t, d.raw, d.kind)
	return d
}

// installCommitTimes adds, next to the audit trigger, a table
// leaf_alloc_at recording the new max_id of every committed UPDATE with the
// database's clock in Unix microseconds (same host as the test), and a
// BEFORE UPDATE trigger that sleeps 150 ms inside the allocating
// transaction of tags starting with slowPrefix.
func installCommitTimes(t testing.TB, d *db, slowPrefix string) {
	t.Helper()
	var stmts []string
	if d.kind == "postgres" {
		stmts = []string{
			`CREATE TABLE leaf_alloc_at (biz_tag varchar(128), new_max bigint, at_micros bigint)`,
			`CREATE FUNCTION leaf_at() RETURNS trigger AS $$ BEGIN
			   INSERT INTO leaf_alloc_at VALUES (NEW.biz_tag, NEW.max_id, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
			   RETURN NEW; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER leaf_at AFTER UPDATE ON leaf_alloc FOR EACH ROW EXECUTE FUNCTION leaf_at()`,
			`CREATE FUNCTION leaf_slow() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(0.15); RETURN NEW; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER leaf_slow BEFORE UPDATE ON leaf_alloc FOR EACH ROW
			   WHEN (NEW.biz_tag LIKE '` + slowPrefix + `%') EXECUTE FUNCTION leaf_slow()`,
		}
	} else {
		stmts = []string{
			`CREATE TABLE leaf_alloc_at (biz_tag varchar(128), new_max bigint, at_micros bigint)`,
			`CREATE TRIGGER leaf_at AFTER UPDATE ON leaf_alloc FOR EACH ROW
			   INSERT INTO leaf_alloc_at VALUES (NEW.biz_tag, NEW.max_id, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED))`,
			`CREATE TRIGGER leaf_slow BEFORE UPDATE ON leaf_alloc FOR EACH ROW
			   BEGIN IF NEW.biz_tag LIKE '` + slowPrefix + `%' THEN DO SLEEP(0.15); END IF; END`,
		}
	}
	for _, s := range stmts {
		if _, err := d.raw.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// committedBefore is the highest max_id of tag committed before at (1 when
// none), by leaf_alloc_at.
func (d *db) committedBefore(t testing.TB, tag string, at time.Time) int64 {
	t.Helper()
	q := `SELECT COALESCE(MAX(new_max), 1) FROM leaf_alloc_at WHERE biz_tag = ? AND at_micros < ?`
	if d.kind == "postgres" {
		q = `SELECT COALESCE(MAX(new_max), 1) FROM leaf_alloc_at WHERE biz_tag = $1 AND at_micros < $2`
	}
	var n int64
	if err := d.raw.QueryRow(q, tag, at.UnixMicro()).Scan(&n); err != nil {
		t.Fatalf("read leaf_alloc_at of %q: %v", tag, err)
	}
	return n
}

// segmentBuffer is what the buffers API says of one tag.
type segmentBuffer struct {
	BizTag  string `json:"bizTag"`
	InitOK  bool   `json:"initOk"`
	Loading bool   `json:"loading"`
}

// buffersOf returns what the buffers API says of tag; false when it says
// nothing (or does not answer).
func buffersOf(p *servertest.Proc, tag string) (segmentBuffer, bool) {
	status, body, err := p.Get(context.Background(), "/api/v1/segment/buffers?prefix="+url.QueryEscape(tag))
	if err != nil || status != 200 {
		return segmentBuffer{}, false
	}
	var s struct{ Buffers []segmentBuffer }
	if json.Unmarshal([]byte(body), &s) != nil {
		return segmentBuffer{}, false
	}
	for _, b := range s.Buffers {
		if b.BizTag == tag {
			return b, true
		}
	}
	return segmentBuffer{}, false
}

// waitInit waits until p has loaded the first segment of tag.
func waitInit(t testing.TB, p *servertest.Proc, tag string, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, ok := buffersOf(p, tag); ok && b.InitOK {
			return
		}
	}
	t.Fatalf("%s: no first segment of %q within %v", p.Addr(), tag, limit)
}

// waitLoadingAny polls the servers' buffers APIs until one shows a load of
// tag in flight after its first segment, and returns its index; -1 after
// limit.
func waitLoadingAny(servers []*servertest.Proc, tag string, limit time.Duration) int {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		for i, p := range servers {
			if b, ok := buffersOf(p, tag); ok && b.InitOK && b.Loading {
				return i
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return -1
}
