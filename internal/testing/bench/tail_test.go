package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
)

// tailSection measures issue 22 item 2: the IDs a rolling restart of 3
// servers skips on a busy tag, with --return-tail=false (before) and true
// (after), in the same run.
func tailSection(t *testing.T, rep *report) {
	var b strings.Builder
	fmt.Fprintf(&b, "3 leaf-server processes on one PostgreSQL database, one tag (DB step 2,000, the dynamic step grows), "+
		"6 clients asking for batches of 100 (2 per server); after %v of load the servers are restarted one after the other "+
		"(SIGTERM, wait for the exit, start again on the same data directory, %v of load), then the load stops. "+
		"Skipped = max_id − 1 − IDs handed out − IDs still buffered by the 3 servers. Every ID is checked for duplicates.\n\n",
		scale(2*time.Second), scale(time.Second))
	b.WriteString("| --return-tail | IDs handed out | max_id | still buffered | **skipped by the rolling restart** | tails given back | duplicates |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, on := range []bool{false, true} {
		r := rollingRestart(t, on)
		fmt.Fprintf(&b, "| %v | %s | %s | %s | **%s** | %d of 3 | %d |\n", on, num(float64(r.served), 0), num(float64(r.maxID), 0),
			num(float64(r.buffered), 0), num(float64(r.maxID-1-r.served-r.buffered), 0), r.returned, r.dups)
	}
	rep.add("IDs skipped by a rolling restart of 3 servers, with and without tail return", b.String())
}

type rollingResult struct {
	served, maxID, buffered int64
	returned, dups          int
}

func rollingRestart(t *testing.T, returnTail bool) rollingResult {
	pg := dbtest.Postgres(t)
	st, _ := pgSetup(t, pg)
	create(t, st, "busy", 2000)
	args := func(dir string) []string {
		return []string{"--segment-dsn", pg, "--migrate=false", "--snowflake=false", "--demo-tag=false",
			"--data-dir", dir + "/data", "--return-tail=" + strconv.FormatBool(returnTail)}
	}
	var dirs [3]string
	var procs [3]atomic.Pointer[servertest.Proc]
	for i := range procs {
		dirs[i] = t.TempDir()
		procs[i].Store(servertest.Start(t, serverBin, servertest.Options{Dir: dirs[i], Args: args(dirs[i])}))
	}
	var (
		mu   sync.Mutex // guards seen, dups
		seen = map[int64]bool{}
		dups int
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				p := procs[i%3].Load()
				status, body, err := p.Get(ctx, "/api/v1/segment/busy?count=100")
				if err != nil || status != 200 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				var a struct{ IDs []string }
				if json.Unmarshal([]byte(body), &a) != nil {
					continue
				}
				mu.Lock()
				for _, s := range a.IDs {
					id, _ := strconv.ParseInt(s, 10, 64)
					if seen[id] {
						dups++
					}
					seen[id] = true
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(scale(2 * time.Second)) // the load runs meanwhile
	returned := 0
	for i := range procs {
		p := procs[i].Load()
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("leaf-server did not stop within 30s:\n%s", p.Logs())
		}
		if strings.Contains(p.Logs(), `msg="segment: unused tail given back" biz_tag=busy`) {
			returned++
		}
		procs[i].Store(servertest.Start(t, serverBin, servertest.Options{Dir: dirs[i], Args: args(dirs[i])}))
		time.Sleep(scale(time.Second))
	}
	cancel()
	wg.Wait()
	var r rollingResult
	for i := range procs {
		_, body, err := procs[i].Load().Get(context.Background(), "/api/v1/segment/buffers")
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Buffers []struct {
				BizTag    string `json:"bizTag"`
				Remaining string `json:"remaining"`
			} `json:"buffers"`
		}
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("buffers: %v: %s", err, body)
		}
		for _, bf := range s.Buffers {
			if bf.BizTag == "busy" {
				n, _ := strconv.ParseInt(bf.Remaining, 10, 64)
				r.buffered += n
			}
		}
	}
	maxID, err := st.MaxID(context.Background(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	r.served, r.dups = int64(len(seen)), dups
	mu.Unlock()
	r.maxID, r.returned = maxID, returned
	if r.dups > 0 {
		t.Errorf("%d duplicate IDs in the rolling restart (return tail %v)", r.dups, returnTail)
	}
	return r
}
