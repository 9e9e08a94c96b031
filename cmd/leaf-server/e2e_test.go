package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/zkworker"
	"github.com/leaf-go/leaf/store"
)

// TestDefaultStartServesDemoTag is the README's first command: no settings,
// no database installed, and within 10 s the demo tag serves 1, 2, 3.
func TestDefaultStartServesDemoTag(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	p := startServer(t, dir)
	for want := int64(1); want <= 3; want++ {
		if got := p.id(t, "leaf-segment-test"); got != want {
			t.Fatalf("ID %d = %d, want %d", want, got, want)
		}
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("first IDs took %v, want under 10s", elapsed)
	}
	// Snowflake mode is on by default with static worker ID 0.
	status, body, err := p.get(t.Context(), "/api/snowflake/get/anything")
	sf, perr := strconv.ParseInt(body, 10, 64)
	if err != nil || status != 200 || perr != nil {
		t.Fatalf("GET /api/snowflake/get/anything = %d %q %v, want 200 and an ID", status, body, err)
	}
	if parts := snowflake.DefaultLayout().Decompose(sf); parts.Worker != 0 || time.Since(parts.Time()).Abs() > time.Minute {
		t.Errorf("snowflake ID %d decodes to %+v, want worker 0 and about now", sf, parts)
	}
	if !strings.Contains(p.logs(), "inserted the demo tag") {
		t.Errorf("log does not say the demo tag was inserted:\n%s", p.logs())
	}
}

// TestSIGTERMDrainsAndExits checks the graceful shutdown: exit status 0 and
// no listener left.
func TestSIGTERMDrainsAndExits(t *testing.T) {
	p := startServer(t, t.TempDir())
	p.id(t, "leaf-segment-test")
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("leaf-server did not exit within 15s of SIGTERM")
	}
	if code := p.ExitCode(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0\n%s", code, p.logs())
	}
	if _, _, err := p.get(context.Background(), "/healthz"); err == nil {
		t.Error("server still answers after SIGTERM")
	}
}

// TestTagAddedAndRemovedWhileRunning: a new row is served on its first
// request (miss lookup), a deleted row stops being served after a refresh.
func TestTagAddedAndRemovedWhileRunning(t *testing.T) {
	dir := t.TempDir()
	dsnStr := "sqlite:" + dir + "/leaf.db"
	p := startServer(t, dir, "--segment-dsn", dsnStr, "--refresh-interval", "1s")
	st := openStore(t, dsnStr)
	if status, body, _ := p.get(t.Context(), "/api/segment/get/late"); status != 500 || !strings.Contains(body, "id=-2") {
		t.Fatalf("unknown tag = %d %s, want 500 with id=-2", status, body)
	}
	if err := st.Create(t.Context(), store.Row{BizTag: "late", MaxID: 500, Step: 100}); err != nil {
		t.Fatal(err)
	}
	// The limiter may refuse a lookup right after the failed one; a second
	// later it must have a token again.
	var got int64
	deadline := time.Now().Add(3 * time.Second)
	for {
		status, body, err := p.get(t.Context(), "/api/segment/get/late")
		if err == nil && status == 200 {
			got, _ = strconv.ParseInt(body, 10, 64)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new tag not served within 3s: %d %s %v", status, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got != 500 {
		t.Errorf("first ID of new tag = %d, want 500", got)
	}
	if err := st.Delete(t.Context(), "late"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		status, body, _ := p.get(t.Context(), "/api/segment/get/late")
		if status == 500 && strings.Contains(body, "id=-2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted tag still served 5s later: %d %s", status, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestKillNineRestart: after kill -9 the first ID is at or above the max_id
// the database held at the kill, on every store.
func TestKillNineRestart(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			dsnStr := testDSN(t, kind, dir)
			st := openStore(t, dsnStr)
			if err := st.Create(t.Context(), store.Row{BizTag: "k9", MaxID: 1, Step: 50}); err != nil {
				t.Fatal(err)
			}
			p := startServer(t, dir, "--segment-dsn", dsnStr)
			var last int64
			for i := 0; i < 120; i++ {
				last = p.id(t, "k9")
			}
			// The kill lands once the next segment is reserved but unused (not
			// after a fixed time): the restarted server must skip it too.
			waittest.For(t, 20*time.Second, "the prefetched segment of k9", func() bool {
				status, body, err := p.get(t.Context(), "/api/v1/segment/buffers?prefix=k9")
				return err == nil && status == 200 && strings.Contains(body, `"nextReady":true`)
			})
			p.kill9()
			maxAtKill := maxID(t, st, "k9")
			p2 := startServer(t, dir, "--segment-dsn", dsnStr)
			first := p2.id(t, "k9")
			if first < maxAtKill || first <= last {
				t.Errorf("first ID after kill -9 = %d, want >= max_id at kill %d and > last ID %d", first, maxAtKill, last)
			}
		})
	}
}

// TestFourServersOneDatabase: four processes, 64 clients, 200,000 requests,
// step 10. Every ID unique, inside a range some committed UPDATE reserved
// (recorded by an audit trigger), and no error while the database is healthy.
func TestFourServersOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test; run without -short")
	}
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			dsnStr := testDSN(t, kind, dir)
			st := openStore(t, dsnStr) // applies the migrations once
			db := rawDB(t, kind, dsnStr)
			dbtest.InstallAudit(t, db, kind)
			if err := st.Create(t.Context(), store.Row{BizTag: "e2e", MaxID: 1, Step: 10}); err != nil {
				t.Fatal(err)
			}
			var servers []*proc
			for i := 0; i < 4; i++ {
				servers = append(servers, startServer(t, t.TempDir(), "--segment-dsn", dsnStr, "--migrate=false"))
			}
			const clients, total = 64, 200_000
			ids := make([][]int64, clients)
			errs := make(chan string, clients)
			var wg sync.WaitGroup
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					srv := servers[c%len(servers)]
					for i := 0; i < total/clients; i++ {
						status, body, err := srv.get(context.Background(), "/api/segment/get/e2e")
						if err != nil || status != 200 {
							errs <- fmt.Sprintf("client %d request %d: %d %q %v", c, i, status, body, err)
							return
						}
						n, err := strconv.ParseInt(body, 10, 64)
						if err != nil {
							errs <- fmt.Sprintf("client %d: body %q", c, body)
							return
						}
						ids[c] = append(ids[c], n)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			all := slices.Concat(ids...)
			if len(all) != total {
				t.Fatalf("collected %d IDs, want %d", len(all), total)
			}
			slices.Sort(all)
			for i := 1; i < len(all); i++ {
				if all[i] == all[i-1] {
					t.Fatalf("duplicate ID %d", all[i])
				}
			}
			ranges := dbtest.AuditRanges(t, db, kind, "e2e")
			for _, id := range all {
				if !dbtest.InRanges(ranges, id) {
					t.Fatalf("ID %d is in no range a committed UPDATE reserved (%d ranges)", id, len(ranges))
				}
			}
			t.Logf("%s: %d unique IDs from %d committed segments", kind, len(all), len(ranges))
		})
	}
}

func testDSN(t *testing.T, kind, dir string) string {
	switch kind {
	case "postgres":
		return dbtest.Postgres(t)
	case "mysql":
		return dbtest.MySQL(t)
	default:
		return "sqlite:" + dir + "/leaf.db"
	}
}

// openStore and maxID: see internal/servertest.
var (
	openStore = servertest.OpenStore
	maxID     = servertest.MaxID
)

func rawDB(t *testing.T, kind, dsnStr string) *sql.DB {
	t.Helper()
	driver, src := "pgx", dsnStr
	if kind == "mysql" {
		driver, src = "mysql", strings.TrimPrefix(dsnStr, "mysql://")
	}
	db, err := sql.Open(driver, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestZooKeeperWorkerIDs: two leaf-server processes plus a node written by
// hand in Leaf's format share one namespace and get three different worker
// IDs; a restarted server keeps its worker ID.
func TestZooKeeperWorkerIDs(t *testing.T) {
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	conn := zktest.Conn(t, addr)
	base := "/snowflake/" + name + "/forever"
	for _, p := range []string{"/snowflake", "/snowflake/" + name, base} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	javaData := fmt.Sprintf(`{"ip":"10.9.9.9","port":"8080","timestamp":%d}`, time.Now().UnixMilli())
	javaNode, err := conn.Create(base+"/10.9.9.9:8080-", []byte(javaData), zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatalf("create Leaf's node: %v", err)
	}
	_, javaSeq, _ := zkworker.ParseNodeName(javaNode[strings.LastIndex(javaNode, "/")+1:])

	args := func(port string) []string {
		return []string{"--worker-id-source", "zookeeper", "--zk", addr, "--leaf-name", name,
			"--advertise-ip", "127.0.0.1", "--snowflake-port", port, "--segment=false"}
	}
	workerOf := func(p *proc) int64 {
		t.Helper()
		status, body, err := p.get(t.Context(), "/api/v1/snowflake/status")
		if err != nil || status != 200 {
			t.Fatalf("status = %d %s %v", status, body, err)
		}
		var st struct {
			WorkerID int64 `json:"workerId"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		return st.WorkerID
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startServer(t, dirA, args("7001")...)
	b := startServer(t, dirB, args("7002")...)
	a.WaitReady(t, time.Minute) // a new node has no history: held back a session timeout + margin
	b.WaitReady(t, time.Minute)
	wa, wb := workerOf(a), workerOf(b)
	if wa == wb || wa == javaSeq || wb == javaSeq {
		t.Fatalf("worker IDs: server A %d, server B %d, Leaf's node %d; want three different", wa, wb, javaSeq)
	}
	for _, p := range []*proc{a, b} {
		status, body, _ := p.get(t.Context(), "/api/snowflake/get/x")
		id, _ := strconv.ParseInt(body, 10, 64)
		if want := workerOf(p); status != 200 || snowflake.Decompose(id).Worker != want {
			t.Errorf("snowflake ID %q from worker %d decodes to worker %d", body, want, snowflake.Decompose(id).Worker)
		}
	}
	// The free-worker-ID gauge counts every /forever node as taken, Leaf's
	// node too: 1024 - 3.
	deadline := time.Now().Add(30 * time.Second)
	for free, rng := metricValue(t, b, "leaf_snowflake_worker_ids_free"), metricValue(t, b, "leaf_snowflake_worker_ids_range"); free != "1021" || rng != "1024"; free, rng = metricValue(t, b, "leaf_snowflake_worker_ids_free"), metricValue(t, b, "leaf_snowflake_worker_ids_range") {
		if time.Now().After(deadline) {
			t.Fatalf("leaf_snowflake_worker_ids_free %q, _range %q; want 1021 of 1024 (three /forever nodes)", free, rng)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.kill9()
	a2 := startServer(t, dirA, args("7001")...)
	a2.WaitReady(t, time.Minute) // waits out the killed process's session, then holds back
	if got := workerOf(a2); got != wa {
		t.Errorf("restarted server has worker ID %d, want its old %d", got, wa)
	}
}

// metricValue returns the value of the unlabelled series name on p's
// /metrics, "" when it is absent.
func metricValue(t *testing.T, p *proc, name string) string {
	t.Helper()
	status, body, err := p.get(t.Context(), "/metrics")
	if err != nil || status != 200 {
		t.Fatalf("/metrics = %d %v", status, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// leafDDL is the leaf_alloc table exactly as Leaf's scripts create it.
const leafDDL = "CREATE TABLE `leaf_alloc` (\n" +
	"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
	"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
	"  `step` int(11) NOT NULL,\n" +
	"  `description` varchar(256)  DEFAULT NULL,\n" +
	"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`biz_tag`)\n" +
	") ENGINE=InnoDB"

// TestLeafPropertiesOnExistingMariaDB: Leaf's own leaf.properties with a
// jdbc:mysql URL starts leaf-server against an existing Leaf database and
// serves its leaf_alloc table unchanged.
func TestLeafPropertiesOnExistingMariaDB(t *testing.T) {
	d := dbtest.MySQL(t)
	mc, err := mysql.ParseDSN(strings.TrimPrefix(d, "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, "mysql", d)
	for _, s := range []string{leafDDL,
		"INSERT INTO leaf_alloc(biz_tag, max_id, step, description) VALUES('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')",
		"INSERT INTO leaf_alloc(biz_tag, max_id, step, description) VALUES('order', 5000001, 1000, 'live tag moved from Java Leaf')",
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	showCreate := func() string {
		var name, ddl string
		if err := db.QueryRow("SHOW CREATE TABLE leaf_alloc").Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		return ddl
	}
	before := showCreate()
	props := fmt.Sprintf(`leaf.name=com.sankuai.leaf.opensource.test
leaf.segment.enable=true
leaf.jdbc.url=jdbc:mysql://%s/%s?useUnicode=true&characterEncoding=utf8
leaf.jdbc.username=%s
leaf.jdbc.password=%s

leaf.snowflake.enable=false
#leaf.snowflake.zk.address=
#leaf.snowflake.port=
`, mc.Addr, mc.DBName, mc.User, mc.Passwd)
	dir := t.TempDir()
	file := filepath.Join(dir, "leaf.properties")
	if err := os.WriteFile(file, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServer(t, dir, "--config", file)
	if got := p.id(t, "leaf-segment-test"); got != 1 {
		t.Errorf("first leaf-segment-test ID = %d, want 1", got)
	}
	if got := p.id(t, "order"); got != 5000001 {
		t.Errorf("first order ID = %d, want 5000001 (continuing from Leaf's max_id)", got)
	}
	if status, body, _ := p.get(t.Context(), "/api/snowflake/get/x"); status != 503 {
		t.Errorf("snowflake with leaf.snowflake.enable=false = %d %s, want 503", status, body)
	}
	if after := showCreate(); after != before {
		t.Errorf("leaf_alloc changed:\nbefore %s\nafter  %s", before, after)
	}
	if mc.Passwd != "" && strings.Contains(p.logs(), ":"+mc.Passwd+"@") {
		t.Errorf("log shows the database password")
	}
}

// TestSQLLeaseWorkerIDs: three servers on one PostgreSQL get three different
// worker IDs from the lease table; a server stopped with SIGTERM releases its
// worker ID so the next server can take it at once, with a new generation.
func TestSQLLeaseWorkerIDs(t *testing.T) {
	d := dbtest.Postgres(t)
	args := []string{"--segment-dsn", d, "--worker-id-source", "sql"}
	status := func(p *proc) (int64, int64) {
		t.Helper()
		code, body, err := p.get(t.Context(), "/api/v1/snowflake/status")
		if err != nil || code != 200 {
			t.Fatalf("status = %d %s %v", code, body, err)
		}
		var st struct {
			WorkerID    int64 `json:"workerId"`
			Source      string
			SourceState struct{ Generation int64 } `json:"sourceState"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || st.Source != "sql" {
			t.Fatalf("status %s: %v, want source sql", body, err)
		}
		return st.WorkerID, st.SourceState.Generation
	}
	var servers []*proc
	seen := map[int64]bool{}
	for i := 0; i < 3; i++ {
		p := startServer(t, t.TempDir(), args...)
		p.WaitReady(t, time.Minute) // a fresh row has no history: held back TTL + margin
		w, _ := status(p)
		if seen[w] {
			t.Fatalf("server %d got worker ID %d, already taken", i, w)
		}
		seen[w] = true
		servers = append(servers, p)
		code, body, _ := p.get(t.Context(), "/api/snowflake/get/x")
		id, _ := strconv.ParseInt(body, 10, 64)
		if code != 200 || snowflake.Decompose(id).Worker != w {
			t.Errorf("server %d: snowflake get = %d %q, want an ID of worker %d", i, code, body, w)
		}
		if code, body, _ := p.get(t.Context(), "/readyz"); code != 200 {
			t.Errorf("server %d /readyz = %d %s", i, code, body)
		}
	}
	// The lease renews every 3 s: its heartbeat age on /metrics stays small.
	_, metrics, _ := servers[0].get(t.Context(), "/metrics")
	var age float64
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, "leaf_snowflake_source_heartbeat_age_seconds "); ok {
			age, _ = strconv.ParseFloat(v, 64)
			break
		}
		age = -1
	}
	if age < 0 || age > 10 {
		t.Errorf("leaf_snowflake_source_heartbeat_age_seconds = %v, want a recent renewal (0..10 s)", age)
	}
	w0, g0 := status(servers[0])
	if err := servers[0].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-servers[0].Done()
	p := startServer(t, t.TempDir(), args...)
	w, g := status(p)
	if w != w0 || g <= g0 {
		t.Errorf("after SIGTERM of the holder of worker %d (generation %d), a new server got worker %d generation %d; want %d with a higher generation", w0, g0, w, g, w0)
	}
}

// TestCustomLayout: --time-bits/--worker-bits/--sequence-bits/--epoch-ms and
// --random-start=false reach the generator.
func TestCustomLayout(t *testing.T) {
	p := startServer(t, t.TempDir(), "--segment=false", "--epoch-ms", "1600000000000",
		"--time-bits", "43", "--worker-bits", "6", "--sequence-bits", "14", "--worker-id", "63", "--random-start=false")
	code, body, err := p.get(t.Context(), "/api/snowflake/get/x")
	id, perr := strconv.ParseInt(body, 10, 64)
	if err != nil || code != 200 || perr != nil {
		t.Fatalf("snowflake get = %d %q %v", code, body, err)
	}
	l := snowflake.Layout{Epoch: time.UnixMilli(1600000000000), TimeBits: 43, WorkerBits: 6, SequenceBits: 14}
	parts := l.Decompose(id)
	if parts.Worker != 63 || parts.Sequence != 0 || time.Since(parts.Time()).Abs() > time.Minute {
		t.Errorf("ID %d decodes with the custom layout to %+v, want worker 63, sequence 0 (no random start), about now", id, parts)
	}
	_, body, _ = p.get(t.Context(), "/api/v1/snowflake/decode/"+strconv.FormatInt(id, 10))
	if !strings.Contains(body, `"worker":63`) || !strings.Contains(body, `"timeBits":43`) {
		t.Errorf("decode with the server's layout = %s, want worker 63 and timeBits 43", body)
	}
}

// TestPortTakenFailsBeforeSideEffects: a taken port stops the start before
// any migration, demo row or worker ID claim, naming the address.
func TestPortTakenFailsBeforeSideEffects(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the leaf-server binary")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(serverBin, "--listen", ln.Addr().String())
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "address already in use") {
		t.Fatalf("leaf-server on a taken port: %v\n%s\nwant exit 1 saying the address is in use", err, out)
	}
	// The refusal names the address and the setting, and says what to do
	// (issue 23 item 5).
	for _, want := range []string{"listen on " + ln.Addr().String() + " (--listen)", "is in use by another process", "choose another address with --listen"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("leaf-server on a taken port says:\n%s\nwant %q", out, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("data dir created before the port was bound (stat: %v)", err)
	}
}

// TestPprofListen: --pprof-listen serves the Go profiles on its own port and
// only there; the public port answers 404 for them; the command line (which
// may hold secrets) is not served.
func TestPprofListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const secret = "pprof-test-admin-secret"
	p := startServer(t, t.TempDir(), "--pprof-listen", addr, "--admin-token", secret)
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/cmdline?x=1", "/debug/pprof/"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), secret) {
			t.Fatalf("GET %s on the pprof port shows the admin token:\n%s", path, body)
		}
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatalf("GET pprof index on --pprof-listen %s: %v", addr, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("GET /debug/pprof/ on %s = %d\n%s\nwant 200 with the profile index", addr, resp.StatusCode, body)
	}
	if status, body, err := p.get(t.Context(), "/debug/pprof/"); err != nil || status != 404 {
		t.Fatalf("GET /debug/pprof/ on the public port = %d %q %v, want 404", status, body, err)
	}
	if !strings.Contains(p.logs(), "pprof listening") {
		t.Errorf("log does not name the pprof address:\n%s", p.logs())
	}
}
