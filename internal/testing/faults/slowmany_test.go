package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
)

// TestManyServersSlowDatabase: 3 servers share one database (PostgreSQL, and
// MariaDB) behind one fault proxy that delays every answer by 200 ms, so a
// segment load takes 2 (PostgreSQL) to 5 (MariaDB) delayed round trips.
// Single-ID clients on a tag of step 100 and batch clients asking 1,000 IDs
// of a tag of step 200 (more than both buffers hold until Leaf's dynamic
// step has doubled twice) run for 6 s; then the
// batches stop and the single clients must be served again by themselves
// while the database stays slow. Every failure must be a Leaf -3 within its
// bound, no ID may repeat, and every ID must lie in a committed range.
func TestManyServersSlowDatabase(t *testing.T) {
	t.Parallel()
	const (
		delay   = 200 * time.Millisecond
		servers = 3
		run     = 6 * time.Second
	)
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := newDB(t, kind)
			d.create(t, "single", 1, 100)
			d.create(t, "burst", 1, 200)
			px := faultproxy.Start(t, d.upstream())
			var ps []*servertest.Proc
			for range servers {
				ps = append(ps, start(t, t.TempDir(), "--segment-dsn", d.via(t, px), "--migrate=false", "--snowflake=false"))
			}
			px.Delay(t, delay)
			// The first load of a tag waits up to LoadTimeout, later ones --wait-timeout (1 s).
			single := newTally(loadTimeout+slack, 10*time.Second)
			burst := newTally(loadTimeout+slack, 10*time.Second)
			var singles, bursts []target
			for _, p := range ps {
				for range 2 {
					singles = append(singles, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/single", tally: single})
				}
				bursts = append(bursts, target{srv: func() *servertest.Proc { return p }, path: "/api/v1/segment/burst?count=1000", batch: true, tally: burst})
			}
			sctx, stopSingles := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { drive(sctx, singles) })
			bctx, stopBursts := context.WithTimeout(context.Background(), run)
			single.startFault()
			drive(bctx, bursts)
			stopBursts()
			single.endFault()
			rec := single.waitRecovered(t, time.Second, 20*time.Second)
			stopSingles()
			wg.Wait()

			name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
			cmd := "go test -race -count=1 -run '^TestManyServersSlowDatabase$/^" + kind + "$' ./faults/"
			for _, tg := range []struct {
				tag  string
				tl   *tally
				size string
				rec  string
			}{
				{"single", single, fmt.Sprintf("%s +%v per answer, %d servers, step 100, 2 single-ID clients per server", name, delay, servers), fmtRecovery(rec)},
				{"burst", burst, fmt.Sprintf("%s +%v per answer, %d servers, step 200, batches of 1,000 (1 client per server, %v)", name, delay, servers, run), "n/a"},
			} {
				r := check(t, tg.tl, d, tg.tag)
				for k := range r.Errors {
					if k != "500 -3" && k != "503 -3" {
						t.Errorf("%s: error %q, want only Leaf -3 (no segment ready in time)", tg.tag, k)
					}
				}
				r.Scenario, r.Size, r.Recovery, r.Cmd = "1 many servers, one database", tg.size, tg.rec, cmd
				r.Note = fmt.Sprintf("%d committed segments", len(d.ranges(t, tg.tag)))
				if tg.tag == "single" {
					r.Note += "; recovery = single clients served again after the batches stopped, database still slow"
				}
				report.add(t, r)
			}
		})
	}
}
