package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
)

// rss returns the resident set size of pid in bytes (0 when unknown).
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// serverTagsSection: the first request of N distinct tags on the real
// leaf-server (each one a synchronous segment load, and with restore safety
// a high-water mark stored in <data-dir>), against the same warm-up in
// process without marks (the memory section).
func serverTagsSection(t *testing.T, rep *report) {
	type size struct{ tags, clients int }
	// Issue 13's target: the loads/s at 100,000 tags at least 0.8 × those
	// at 1,000, in one run. The budget lets 100,000 first uses finish.
	sizes := []size{{1000, 32}, {10_000, 32}, {100_000, 32}}
	budget := 90 * time.Second
	if *quick {
		sizes, budget = sizes[:2], 3*time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "A fresh PostgreSQL database with N tags (one `INSERT … SELECT generate_series`, DB step 1,000; synchronous_commit off as in the memory section) and a fresh leaf-server "+
		"(default settings, so its restore-safety high-water marks go to `<data-dir>/segment-marks.log`); C Go clients then request "+
		"each tag once over HTTP, each first request being a synchronous segment load, for at most %v per size. "+
		"RSS is the server's resident memory from /proc. Compare the loads/s with the in-process warm-up without marks "+
		"in the memory section: a new segment is served only once its mark is durable, and the marks log gets one record per load, "+
		"appended and fsynced once per group of loads that arrived during the previous write, "+
		"so first-use loads/s grow with the number of clients waiting (see the 10,000-tag rows).\n\n", budget)
	b.WriteString("| tags | clients C | warmed | time | **first requests (loads) per s** | errors | server RSS before → after | RSS per warmed tag |\n|---:|---:|---:|---:|---:|---:|---|---:|\n")
	rates := map[int]float64{} // loads/s by tags
	for _, sz := range sizes {
		n := sz.tags
		pg := dbtest.Postgres(t)
		_, conn := pgSetup(t, pg)
		// As in the memory section: commits do not wait for the WAL flush,
		// so that the loads/s show the server's own cost per load.
		if _, err := conn.Exec(t.Context(), `ALTER DATABASE `+conn.Config().Database+` SET synchronous_commit = off`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), `INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time)
			SELECT 'tag-' || lpad(g::text, 6, '0'), 1, 1000, now() FROM generate_series(1, $1::int) g`, n); err != nil {
			t.Fatal(err)
		}
		leaf := startLeaf(t, pg)
		pid := pidOf(serverBin)
		r0 := rss(pid)
		ctx, cancel := context.WithTimeout(t.Context(), budget)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sz.clients}, Timeout: 30 * time.Second}
		var next, done, failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range sz.clients {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(n) && ctx.Err() == nil; i = next.Add(1) {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, leaf.URL(fmt.Sprintf("/api/segment/get/tag-%06d", i)), nil)
					resp, err := client.Do(req)
					if err != nil {
						if ctx.Err() == nil {
							failed.Add(1)
						}
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failed.Add(1)
						continue
					}
					done.Add(1)
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		cancel()
		client.CloseIdleConnections()
		r1 := rss(pid)
		per := "–"
		if d := done.Load(); d > 0 {
			per = num(float64(r1-r0)/float64(d), 0) + " B"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %v | **%s** | %d | %s → %s | %s |\n", num(float64(n), 0), sz.clients, num(float64(done.Load()), 0),
			took.Round(time.Millisecond), num(float64(done.Load())/took.Seconds(), 0), failed.Load(), mib(uint64(r0)), mib(uint64(r1)), per)
		leaf.Kill9()
		rates[n] = float64(done.Load()) / took.Seconds()
	}
	if rates[1000] > 0 && rates[100_000] > 0 {
		fmt.Fprintf(&b, "\nLoads/s at 100,000 tags ÷ at 1,000 tags: **%.2f** (target ≥ 0.8).\n", rates[100_000]/rates[1000])
	}
	rep.add("First use of many tags on the real server", b.String())
}
