package bench

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
)

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }

// scale shortens every run in -quick mode.
func scale(d time.Duration) time.Duration {
	if *quick {
		return max(d/4, 300*time.Millisecond)
	}
	return d
}

// shared carries figures from one section to the next (same run).
type shared struct {
	single map[int]loadResult // leaf-go single-ID by concurrency
}

// TestHarness is `make bench`: every section of BENCHMARKS.md in one run.
func TestHarness(t *testing.T) {
	if !*harness {
		t.Skip("benchmark harness: run with -args -harness (make bench)")
	}
	rep := &report{start: time.Now()}
	rep.add("Machine", machine(pgVersion(t), myVersion(t)))
	sh := &shared{single: map[int]loadResult{}}

	benchtime, count := "1s", 3
	if *quick {
		benchtime, count = "200ms", 1
	}
	section := func(name string, f func(t *testing.T)) {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), name) {
			return
		}
		added := len(rep.sections)
		start := time.Now()
		ok := t.Run(name, f)
		fmt.Printf("section %s: %v\n", name, time.Since(start).Round(time.Second))
		if len(rep.sections) == added {
			state := "failed"
			if ok {
				state = "skipped"
			}
			rep.add(name, fmt.Sprintf("Not measured in this run (%s; see the test log).", state))
		}
	}
	section("segment", func(t *testing.T) { segmentSection(t, rep, benchtime, count) })
	section("http", func(t *testing.T) { httpSection(t, rep, sh) })
	section("wrk", func(t *testing.T) { wrkSection(t, rep) })
	section("alternatives", func(t *testing.T) { alternativesSection(t, rep, sh) })
	section("snowflake", func(t *testing.T) { snowflakeSection(t, rep, benchtime, count) })
	section("slowdb", func(t *testing.T) { slowDBSection(t, rep) })
	section("updates", func(t *testing.T) { updatesSection(t, rep) })
	section("servers", func(t *testing.T) { serversSection(t, rep) })
	section("memory", func(t *testing.T) { memorySection(t, rep) })
	section("tags", func(t *testing.T) { serverTagsSection(t, rep) })
	section("refresh", func(t *testing.T) { refreshSection(t, rep) })
	mt := "3s"
	if *quick {
		mt = "300ms"
	}
	section("metrics", func(t *testing.T) { metricsSection(t, rep, mt) })
	section("metricsscale", func(t *testing.T) { metricsScaleSection(t, rep) })
	section("tail", func(t *testing.T) { tailSection(t, rep) })

	load, _ := os.ReadFile("/proc/loadavg")
	rep.add("End of run", fmt.Sprintf("Load average at the end: %s. Wall time %v.",
		strings.Join(strings.Fields(string(load))[:3], " "), time.Since(rep.start).Round(time.Second)))
	if *outPath != "" {
		if err := rep.write(*outPath); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("wrote %s\n", *outPath)
	}
}

func pgVersion(t *testing.T) string {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	dsnStr := os.Getenv("LEAF_TEST_POSTGRES_DSN")
	if dsnStr == "" {
		dsnStr = dbtest.DefaultPostgres
	}
	c, err := pgx.Connect(ctx, dsnStr)
	if err != nil {
		return "not reachable"
	}
	defer c.Close(ctx)
	var v, sc string
	_ = c.QueryRow(ctx, `SHOW server_version`).Scan(&v)
	_ = c.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sc)
	return fmt.Sprintf("%s (synchronous_commit=%s)", v, sc)
}

func myVersion(t *testing.T) string {
	dsnStr := os.Getenv("LEAF_TEST_MYSQL_DSN")
	if dsnStr == "" {
		dsnStr = dbtest.DefaultMySQL
	}
	db, err := sql.Open("mysql", strings.TrimPrefix(dsnStr, "mysql://"))
	if err != nil {
		return "not reachable"
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var v string
	var flush int
	if err := db.QueryRowContext(ctx, `SELECT VERSION(), @@innodb_flush_log_at_trx_commit`).Scan(&v, &flush); err != nil {
		return "not reachable"
	}
	return fmt.Sprintf("%s (innodb_flush_log_at_trx_commit=%d)", v, flush)
}

// mean averages the rates and latencies of runs of the same setup.
func mean(rs []loadResult) loadResult {
	var m loadResult
	if len(rs) == 0 {
		return m
	}
	n := float64(len(rs))
	m.Errors, m.ErrorExamples = map[string]int64{}, map[string]string{}
	for _, r := range rs {
		m.Requests += r.Requests
		m.OK += r.OK
		m.Failed += r.Failed
		m.IDs += r.IDs
		m.Duplicates += r.Duplicates
		m.RequestsPerS += r.RequestsPerS / n
		m.IDsPerS += r.IDsPerS / n
		m.Latency.P50 += time.Duration(float64(r.Latency.P50) / n)
		m.Latency.P90 += time.Duration(float64(r.Latency.P90) / n)
		m.Latency.P99 += time.Duration(float64(r.Latency.P99) / n)
		m.Latency.P999 += time.Duration(float64(r.Latency.P999) / n)
		m.Latency.Max = max(m.Latency.Max, r.Latency.Max)
		for k, v := range r.Errors {
			if m.Errors[k] == 0 {
				m.ErrorExamples[k] = r.ErrorExamples[k]
			}
			m.Errors[k] += v
		}
	}
	return m
}

// medianRes is the run with the median requests/s; its latencies go with it.
func medianRes(rs []loadResult) loadResult {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b loadResult) int { return cmp.Compare(a.RequestsPerS, b.RequestsPerS) })
	if len(s) == 0 {
		return loadResult{}
	}
	return s[len(s)/2]
}

// httpSection: /api/segment/get on the real leaf-server (PostgreSQL) against
// the bare chi baseline process, then the batch API against single IDs.
func httpSection(t *testing.T, rep *report, sh *shared) {
	pg := dbtest.Postgres(t)
	st, _ := pgSetup(t, pg)
	create(t, st, "bench", 1_000_000)
	leaf, bare := startLeaf(t, pg), startBare(t)
	d := scale(time.Second)
	const rounds = 6
	for _, p := range []string{leaf.URL(""), bare.URL("")} { // warm up connections, page cache, the first load
		mustLoad(t, p, "--tag", "bench", "--concurrency", "16", "--duration", secs(scale(time.Second)))
	}
	leafPID, barePID := pidOf(serverBin), pidOf(selfBin)
	var b strings.Builder
	fmt.Fprintf(&b, "`leafctl bench` (built from cmd/leafctl, one process) against two processes on 127.0.0.1: the real `leaf-server` "+
		"(PostgreSQL store, tag step 10^6 so loads are rare, metrics on as in production) and a bare chi router in a process of its own "+
		"whose handler returns an atomic counter (same `http.Server` settings); both built with leaf-server's profile `cmd/leaf-server/default.pgo` "+
		"(leaf-server by `go build`'s default -pgo=auto, the baseline with -pgo=<that file>). Each cell is the median of %d runs of %v, "+
		"alternating which server goes first (ABBA…). Target: leaf-go ≥ 0.90× the bare handler's requests/s. "+
		"On a shared machine the rates swing by ±30%% from run to run; the server's own CPU time per request "+
		"(utime+stime from /proc over all runs) is the steadier measure of what leaf-go adds.\n\n", rounds, d)
	b.WriteString("| clients | leaf-go req/s | bare chi req/s | **ratio** | leaf-go p50 / p99 / p999 | bare p50 / p99 / p999 | server CPU µs/req leaf-go / bare (bare ÷ leaf-go) | errors |\n|---:|---:|---:|---:|---|---|---|---|\n")
	for _, c := range []int{1, 4, 16, 64, 256} {
		var lr, br []loadResult
		var lcpu, bcpu time.Duration
		run := func(pid int, url string, cpu *time.Duration, into *[]loadResult) {
			c0 := cpuTime(pid)
			*into = append(*into, mustLoad(t, url, "--tag", "bench", "--concurrency", itoa(c), "--duration", secs(d)))
			*cpu += cpuTime(pid) - c0
		}
		for round := range rounds {
			if round%2 == 0 {
				run(barePID, bare.URL(""), &bcpu, &br)
				run(leafPID, leaf.URL(""), &lcpu, &lr)
			} else {
				run(leafPID, leaf.URL(""), &lcpu, &lr)
				run(barePID, bare.URL(""), &bcpu, &br)
			}
		}
		l, bb := medianRes(lr), medianRes(br)
		sh.single[c] = l
		perReq := func(cpu time.Duration, rs []loadResult) float64 {
			var n int64
			for _, r := range rs {
				n += r.Requests
			}
			if n == 0 || cpu == 0 {
				return 0
			}
			return float64(cpu.Microseconds()) / float64(n)
		}
		lc, bc := perReq(lcpu, lr), perReq(bcpu, br)
		fmt.Fprintf(&b, "| %d | %s | %s | **%s** | %s / %s / %s | %s / %s / %s | %.1f / %.1f (%s) | %s |\n", c,
			num(l.RequestsPerS, 0), num(bb.RequestsPerS, 0), ratio(l.RequestsPerS, bb.RequestsPerS),
			dur(l.Latency.P50), dur(l.Latency.P99), dur(l.Latency.P999),
			dur(bb.Latency.P50), dur(bb.Latency.P99), dur(bb.Latency.P999), lc, bc, ratio(bc, lc), errSummary(mean(lr)))
	}
	rep.add("HTTP single ID: leaf-server vs a bare chi handler", b.String())

	b.Reset()
	fmt.Fprintf(&b, "`leafctl bench --batch 1000` (`GET /api/v1/segment/bench?count=1000`, JSON `{\"ids\":[\"…\"]}`) on the same server, "+
		"%v per run, against the single-ID route at the same number of clients (table above). Every ID is parsed and checked for uniqueness by leafctl.\n\n", d)
	b.WriteString("| clients | batch req/s | batch IDs/s | single-ID IDs/s | **batch ÷ single** | batch p50 / p99 | errors |\n|---:|---:|---:|---:|---:|---|---|\n")
	for _, c := range []int{1, 4, 16} {
		r := mustLoad(t, leaf.URL(""), "--tag", "bench", "--batch", "1000", "--concurrency", itoa(c), "--duration", secs(d))
		s := sh.single[c]
		fmt.Fprintf(&b, "| %d | %s | %s | %s | **%s** | %s / %s | %s |\n", c, num(r.RequestsPerS, 0), num(r.IDsPerS, 0),
			num(s.IDsPerS, 0), ratio(r.IDsPerS, s.IDsPerS), dur(r.Latency.P50), dur(r.Latency.P99), errSummary(r))
	}
	rep.add("Batch API (count=1000) vs single ID", b.String())
}

// slowDBSection: p999 of Get over HTTP while every database answer is
// delayed 50 ms by a TCP proxy, against the same setup without delay.
func slowDBSection(t *testing.T, rep *report) {
	pg := dbtest.Postgres(t)
	st, conn := pgSetup(t, pg)
	installUpdateLog(t, conn)
	px := faultproxy.Start(t, pgHost(t, pg))
	via, _ := viaHost(t, pg, px.Addr())
	leaf := startLeaf(t, via)
	d := scale(4 * time.Second)
	var b strings.Builder
	fmt.Fprintf(&b, "leaf-server on PostgreSQL through a TCP proxy (`internal/testing/faultproxy`, toxiproxy in-process); the slow case adds 50 ms "+
		"to every answer of the database (each segment load is one `UPDATE … RETURNING` round trip, so ≥ 50 ms). "+
		"A fresh tag per run, warmed by one request (the first load is synchronous by design), then `leafctl bench` for %v; "+
		"2 runs per cell in the order direct, slow, slow, direct; latencies are the mean of the runs' percentiles, max the worst. "+
		"\"loads\" are the UPDATEs of the tags' rows during the runs (trigger log). Target: p999 with the delay indistinguishable from without, zero -3.\n\n", d)
	b.WriteString("| DB step | clients | database | req/s | p50 | p99 | **p999** | max | loads | **-3 answers** | other errors |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, step := range []int64{2000, 100_000} {
		for _, c := range []int{16, 64} {
			runs := map[bool][]loadResult{}
			loads := map[bool]int64{}
			for i, slow := range []bool{false, true, true, false} {
				tag := fmt.Sprintf("switch-%d-%d-%d", step, c, i)
				create(t, st, tag, step)
				mustLoad(t, leaf.URL(""), "--tag", tag, "--requests", "1", "--concurrency", "1")
				if slow {
					px.Delay(t, 50*time.Millisecond)
				}
				r := mustLoad(t, leaf.URL(""), "--tag", tag, "--concurrency", itoa(c), "--duration", secs(d))
				if slow {
					px.ClearDelay(t)
				}
				n, _ := updates(t, conn, tag)
				runs[slow] = append(runs[slow], r)
				loads[slow] += n - 1 // the warm-up's synchronous load is not a switch
			}
			for _, slow := range []bool{false, true} {
				r := mean(runs[slow])
				label := "direct"
				if slow {
					label = "+50 ms"
				}
				var c3 int64
				for _, x := range runs[slow] {
					c3 += code3(x)
				}
				other := "none"
				if r.Failed > c3 {
					other = errSummary(r)
				}
				fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | **%s** | %s | %d | **%d** | %s |\n", num(float64(step), 0), c, label,
					num(r.RequestsPerS, 0), dur(r.Latency.P50), dur(r.Latency.P99), dur(r.Latency.P999), dur(r.Latency.Max), loads[slow], c3, other)
			}
		}
	}
	rep.add("Segment switch under a slow database (50 ms per statement)", b.String())
}

// updatesSection: database UPDATEs per million IDs as the load and the DB
// step change (dynamic step on, Leaf's defaults).
func updatesSection(t *testing.T, rep *report) {
	pg := dbtest.Postgres(t)
	st, conn := pgSetup(t, pg)
	installUpdateLog(t, conn)
	leaf := startLeaf(t, pg)
	d := scale(3 * time.Second)
	var b strings.Builder
	fmt.Fprintf(&b, "One leaf-server on PostgreSQL; a fresh tag per row (so the dynamic step starts at the DB step), "+
		"`leafctl bench` for %v; UPDATEs counted by a trigger on leaf_alloc. Leaf's dynamic step doubles the step while loads come less than 15 min apart "+
		"(up to 10^6), so the steady state is one UPDATE per 10^6 IDs at any rate above 10^6 IDs per 15 min; a short run shows the ramp from the DB step. "+
		"\"fixed step\" is what a server without the dynamic step would write (10^6 ÷ DB step).\n\n", d)
	b.WriteString("| DB step | load | IDs | IDs/s | UPDATEs | **UPDATEs per 10^6 IDs** | fixed step | step at the end |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, step := range []int64{10, 1000, 100_000} {
		for _, l := range []struct {
			name string
			args []string
		}{
			{"single ID, 16 clients", []string{"--concurrency", "16"}},
			{"batch 1000, 4 clients", []string{"--concurrency", "4", "--batch", "1000"}},
		} {
			tag := fmt.Sprintf("upd-%d-%s", step, strings.Fields(l.name)[0])
			create(t, st, tag, step)
			r := mustLoad(t, leaf.URL(""), append([]string{"--tag", tag, "--duration", secs(d)}, l.args...)...)
			n, last := updates(t, conn, tag)
			per := 0.0
			if r.IDs > 0 {
				per = float64(n) / float64(r.IDs) * 1e6
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | **%s** | %s | %s |\n", num(float64(step), 0), l.name, num(float64(r.IDs), 0),
				num(r.IDsPerS, 0), n, num(per, 1), num(1e6/float64(step), 0), num(float64(last), 0))
		}
	}
	rep.add("Database UPDATEs per million IDs", b.String())
}

// serversSection: IDs/s with 1, 2 and 4 leaf-server processes on one
// PostgreSQL, sharing one tag.
func serversSection(t *testing.T, rep *report) {
	pg := dbtest.Postgres(t)
	st, conn := pgSetup(t, pg)
	installUpdateLog(t, conn)
	create(t, st, "multi", 2000)
	var procs []string
	for range 4 {
		procs = append(procs, startLeaf(t, pg).URL(""))
	}
	d := scale(3 * time.Second)
	const clients = 64
	var b strings.Builder
	fmt.Fprintf(&b, "N leaf-server processes on one PostgreSQL database, one tag (DB step 2,000) shared by all; %d clients in all, split evenly, "+
		"one `leafctl bench` process per server, all for %v at once. Everything shares the machine's %d cores, so this shows the "+
		"coordination cost through the row lock, not a cluster's capacity.\n\n", clients, d, runtime.NumCPU())
	b.WriteString("| servers | req/s (sum) | **÷ 1 server** | worst p99 | UPDATEs | errors |\n|---:|---:|---:|---:|---:|---|\n")
	var one float64
	for _, n := range []int{1, 2, 4} {
		for _, p := range procs[:n] { // warm every server's buffer first
			mustLoad(t, p, "--tag", "multi", "--requests", "100", "--concurrency", "4")
		}
		u0, _ := updates(t, conn, "multi")
		res := make([]loadResult, n)
		var wg sync.WaitGroup
		for i, p := range procs[:n] {
			wg.Go(func() {
				r, err := leafctl(t.Context(), p, "--tag", "multi", "--concurrency", itoa(clients/n), "--duration", secs(d))
				if err != nil {
					t.Error(err)
				}
				res[i] = r
			})
		}
		wg.Wait()
		u1, _ := updates(t, conn, "multi")
		var sum float64
		var p99 time.Duration
		var failed []string
		for _, r := range res {
			sum += r.RequestsPerS
			p99 = max(p99, r.Latency.P99)
			if r.Failed > 0 {
				failed = append(failed, errSummary(r))
			}
		}
		if n == 1 {
			one = sum
		}
		errs := "none"
		if len(failed) > 0 {
			errs = strings.Join(failed, "; ")
		}
		fmt.Fprintf(&b, "| %d | %s | **%s** | %s | %d | %s |\n", n, num(sum, 0), ratio(sum, one), dur(p99), u1-u0, errs)
	}
	rep.add("Throughput with 1, 2, 4 servers on one database", b.String())
}
