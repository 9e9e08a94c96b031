package bench

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/segment"
)

// driveResult is one run of an in-process load on a database.
type driveResult struct {
	ids        int64
	perS       float64
	p50, p99   time.Duration
	p999       time.Duration
	errs       int64
	firstErr   error
	duplicates int
}

// drive calls op from c goroutines for d and measures IDs/s and latency;
// every ID is kept and checked for uniqueness.
func drive(ctx context.Context, c int, d time.Duration, op func(context.Context) (int64, error)) driveResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu       sync.Mutex
		lat      []time.Duration
		ids      []int64
		errs     atomic.Int64
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range c {
		wg.Go(func() {
			var l []time.Duration
			var got []int64
			for ctx.Err() == nil {
				t0 := time.Now()
				id, err := op(ctx)
				if ctx.Err() != nil {
					break
				}
				l = append(l, time.Since(t0))
				if err != nil {
					if errs.Add(1) == 1 {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					continue
				}
				got = append(got, id)
			}
			mu.Lock()
			lat = append(lat, l...)
			ids = append(ids, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lat)
	slices.Sort(ids)
	r := driveResult{ids: int64(len(ids)), perS: float64(len(ids)) / el.Seconds(), errs: errs.Load(), firstErr: firstErr}
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			r.duplicates++
		}
	}
	pct := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	r.p50, r.p99, r.p999 = pct(0.5), pct(0.99), pct(0.999)
	return r
}

// alternativesSection: what a user would otherwise call per ID, against
// leaf-go's single-ID HTTP route at the same number of clients.
func alternativesSection(t *testing.T, rep *report, sh *shared) {
	ctx := t.Context()
	d := scale(2 * time.Second)
	conc := []int{1, 16, 64}
	type alt struct {
		name string
		run  func(c int) driveResult
	}
	var alts []alt

	pg := dbtest.Postgres(t)
	st, conn := pgSetup(t, pg)
	create(t, st, "alt", 1)
	if _, err := conn.Exec(ctx, `CREATE SEQUENCE bench_seq`); err != nil {
		t.Fatal(err)
	}
	pgRun := func(query string, args ...any) func(c int) driveResult {
		return func(c int) driveResult {
			cfg, err := pgxpool.ParseConfig(pg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns, cfg.MinConns = int32(c), int32(c)
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			// MinConns connect in the background: measure once they have.
			waittest.For(t, 30*time.Second, "the pool's connections", func() bool { return pool.Stat().IdleConns() >= int32(c) })
			return drive(ctx, c, d, func(ctx context.Context) (id int64, err error) {
				err = pool.QueryRow(ctx, query, args...).Scan(&id)
				return id, err
			})
		}
	}
	alts = append(alts,
		alt{"PostgreSQL `SELECT nextval('bench_seq')`", pgRun(`SELECT nextval('bench_seq')`)},
		alt{"PostgreSQL `UPDATE leaf_alloc SET max_id = max_id + step … RETURNING max_id` (step 1)",
			pgRun(`UPDATE leaf_alloc SET max_id = max_id + step, update_time = now() WHERE biz_tag = $1 RETURNING max_id`, "alt")},
	)

	if myVersion(t) == "not reachable" {
		t.Log("MariaDB not reachable: its row is left out")
	} else {
		my := dbtest.MySQL(t)
		myst, err := openStore(t, my)
		if err != nil {
			t.Fatal(err)
		}
		create(t, myst, "alt", 1)
		alts = append(alts, alt{"MariaDB `BEGIN; UPDATE leaf_alloc … ; SELECT max_id …; COMMIT` (step 1, as Leaf)", func(c int) driveResult {
			db, err := sql.Open("mysql", strings.TrimPrefix(my, "mysql://"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(c)
			db.SetMaxIdleConns(c)
			return drive(ctx, c, d, func(ctx context.Context) (int64, error) {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return 0, err
				}
				defer tx.Rollback()
				if _, err := tx.ExecContext(ctx, `UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = ?`, "alt"); err != nil {
					return 0, err
				}
				var id int64
				if err := tx.QueryRowContext(ctx, `SELECT max_id FROM leaf_alloc WHERE biz_tag = ?`, "alt").Scan(&id); err != nil {
					return 0, err
				}
				return id, tx.Commit()
			})
		}})
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Per ID, what a service would call without leaf-go, driven in-process by Go clients (pgx pool / database/sql, one connection per client) "+
		"for %v each, every ID checked for uniqueness; against leaf-go's `/api/segment/get/{tag}` over HTTP at the same number of clients "+
		"(the HTTP table above: a real leaf-server on PostgreSQL, loaded by leafctl). The databases run with their durable defaults (see Machine).\n\n", d)
	b.WriteString("| per ID | clients | IDs/s | p50 | p99 | p999 | errors | **leaf-go HTTP ÷ this** |\n|---|---:|---:|---:|---:|---:|---|---:|\n")
	for _, a := range alts {
		for _, c := range conc {
			r := a.run(c)
			if r.duplicates > 0 {
				t.Errorf("%s: %d duplicates", a.name, r.duplicates)
			}
			errs := "none"
			if r.errs > 0 {
				errs = fmt.Sprintf("%d (%v)", r.errs, r.firstErr)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | **%s** |\n", a.name, c, num(r.perS, 0), dur(r.p50), dur(r.p99), dur(r.p999),
				errs, ratio(sh.single[c].IDsPerS, r.perS))
		}
	}
	for _, c := range conc {
		s := sh.single[c]
		fmt.Fprintf(&b, "| leaf-go `GET /api/segment/get/{tag}` (from the HTTP table) | %d | %s | %s | %s | %s | %s | 1.00× |\n", c,
			num(s.IDsPerS, 0), dur(s.Latency.P50), dur(s.Latency.P99), dur(s.Latency.P999), errSummary(s))
	}
	rep.add("What a user would otherwise do, per ID", b.String())
}

// memorySection: heap per tag after warming 10, 1,000 and 100,000 tags in
// one process (segment.Generator on PostgreSQL, one Get per tag).
func memorySection(t *testing.T, rep *report) {
	ctx := t.Context()
	pg := dbtest.Postgres(t)
	_, conn := pgSetup(t, pg)
	// Warming 100,000 tags is 100,000 allocation transactions: commit
	// without waiting for the WAL flush, which changes nothing in memory.
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+conn.Config().Database+` SET synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(t, pg)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{10, 1000, 100_000}
	if *quick {
		sizes = sizes[:2]
	}
	var b strings.Builder
	b.WriteString("In one process: a `segment.Generator` on PostgreSQL (leaf_alloc filled by one `INSERT … SELECT generate_series`, DB step 1,000), " +
		"every tag warmed by one `Get` from 16 goroutines (so each holds a loaded current segment; the next is loaded after 10%). " +
		"Heap is `runtime.MemStats.HeapAlloc` after two GCs, before `segment.New` and after warming; the difference is what the generator holds.\n\n")
	b.WriteString("| tags | heap before | heap after | bytes per tag | **bytes per added tag** (vs the previous row) | warm-up time | loads/s while warming |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	have := 0
	var prevN int
	var prevHeld int64
	for _, n := range sizes {
		if _, err := conn.Exec(ctx, `INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time)
			SELECT 'mem-' || lpad(g::text, 6, '0'), 1, 1000, now() FROM generate_series($1::int, $2::int) g`, have+1, n); err != nil {
			t.Fatal(err)
		}
		have = n
		tags := make([]string, n)
		for i := range tags {
			tags[i] = fmt.Sprintf("mem-%06d", i+1)
		}
		before := heap()
		gen, err := segment.New(ctx, st, segment.Config{Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
					if _, err := gen.Get(ctx, tags[i]); err != nil {
						t.Errorf("Get(%q) = %v", tags[i], err)
						return
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		after := heap()
		runtime.KeepAlive(gen)
		gen.Close()
		held := int64(after) - int64(before)
		marginal := "–"
		if prevN > 0 {
			marginal = num(float64(held-prevHeld)/float64(n-prevN), 0)
		}
		prevN, prevHeld = n, held
		fmt.Fprintf(&b, "| %s | %s | %s | %s | **%s** | %v | %s |\n", num(float64(n), 0), mib(before), mib(after),
			num(float64(held)/float64(n), 0), marginal, took.Round(time.Millisecond), num(float64(n)/took.Seconds(), 0))
	}
	rep.add("Memory per tag", b.String())
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
