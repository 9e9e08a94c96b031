package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
)

// TestDatabaseResetBlackhole: like TestDatabaseSlowThenDown's outage, but the
// database connection fails the ugly ways instead of a clean close: every
// connection reset by the peer (TCP RST on any data), or blackholed (data
// swallowed, no answer, the connection never closes). The server serves from
// its buffers, then answers -3 within --wait-timeout (a blackhole must not
// hang a request: the load has its own timeout), and recovers by itself once
// the fault is cleared. While faulted no ID comes from a range reserved
// after the fault began.
func TestDatabaseResetBlackhole(t *testing.T) {
	t.Parallel()
	const wait = 500 * time.Millisecond
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := newDB(t, kind)
			px := faultproxy.Start(t, d.upstream())
			phases := []struct {
				tag, fault string
				extra      time.Duration // time faulted after the runway is spent
			}{
				{"reset1s", "reset", time.Second},
				{"reset3s", "reset", 3 * time.Second},
				{"blackhole1s", "blackhole", time.Second},
				{"blackhole3s", "blackhole", 3 * time.Second},
			}
			for _, ph := range phases {
				d.create(t, ph.tag, 1, 100)
			}
			p := start(t, t.TempDir(), "--segment-dsn", d.via(t, px), "--migrate=false", "--snowflake=false",
				"--wait-timeout", wait.String())
			name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
			for _, ph := range phases {
				tl := newTally(wait+slack, 10*time.Second)
				var targets []target
				for range 8 {
					targets = append(targets, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/" + ph.tag, tally: tl})
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Go(func() { drive(ctx, targets) })
				time.Sleep(time.Second) // healthy warm-up
				var ceiling atomic.Int64
				tl.startFault()
				if ph.fault == "reset" {
					px.Reset(t)
				} else {
					px.Blackhole(t)
				}
				// Read the ceiling once no load is in flight, not after a fixed
				// time: a statement sent before the fault may still be answered
				// (a reset cuts only what is sent after it) and its range
				// served. A load begun after the fault never reaches the
				// database, so max_id read then bounds every ID the server can
				// hand out while faulted.
				waitNoLoad(t, p, ph.tag, 30*time.Second)
				ceiling.Store(d.maxID(t, ph.tag))
				runway := tl.waitFirstErr(t, 60*time.Second)
				time.Sleep(ph.extra)
				ids, _, _, _ := tl.snapshot()
				for _, id := range ids {
					if id >= ceiling.Load() {
						t.Errorf("ID %d handed out while the database was %s, but max_id was %d", id, ph.fault, ceiling.Load())
						break
					}
				}
				px.Clear(t)
				tl.endFault()
				rec := tl.waitRecovered(t, time.Second, 20*time.Second)
				cancel()
				wg.Wait()
				r := check(t, tl, d, ph.tag)
				if r.Errors["500 -3"] == 0 {
					t.Errorf("%s: faulted past the runway but no -3", ph.tag)
				}
				r.Scenario = "2 database reset / blackhole"
				what := map[string]string{"reset": "every connection reset (TCP RST)", "blackhole": "blackholed (no answer, no close)"}[ph.fault]
				r.Size = fmt.Sprintf("%s %s: runway %v spent, then %v more; wait-timeout %v", name, what, runway.Round(time.Millisecond), ph.extra, wait)
				r.Recovery = fmtRecovery(rec)
				r.Cmd = "go test -race -count=1 -run '^TestDatabaseResetBlackhole$/^" + kind + "$' ./faults/"
				report.add(t, r)
			}
		})
	}
}
