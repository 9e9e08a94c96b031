package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/testing/faultproxy"
)

// TestSQLLeaseBlackhole: a server with the SQL lease source reaches its
// database through a proxy that starts swallowing every byte without closing
// the connections (a partition: no RST, no answer) for 14 s, past the lease's
// 10 s TTL. Every snowflake request must answer within --wait-timeout + 0.5 s
// with a coded error or an ID: the request path waits for a high-water store
// at most --wait-timeout, and the stores run in the background ahead of need,
// so no request queues behind a hung one. (Before issue 15 every request hung
// as long as the client waited.) When the proxy forwards again, the lease
// renews and the server serves again by itself. No ID repeats.
func TestSQLLeaseBlackhole(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			sqlLeaseBlackhole(t, kind)
		})
	}
}

func sqlLeaseBlackhole(t *testing.T, kind string) {
	const (
		wait    = 500 * time.Millisecond
		bound   = wait + 500*time.Millisecond
		faulted = 14 * time.Second
		clients = 4
		// hung is how long a client waits before it counts a request as
		// unanswered: far past the bound, short of a test timeout.
		hung = 10 * time.Second
	)
	name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
	d := newDB(t, kind)
	px := faultproxy.Start(t, d.upstream())
	p := start(t, t.TempDir(), "--segment=false", "--worker-id-source", "sql",
		"--segment-dsn", d.via(t, px), "--wait-timeout", wait.String())
	p.WaitReady(t, time.Minute) // a fresh row has no history: held back TTL + margin
	worker := status(t, p).WorkerID
	tl := newTally(bound, bound)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, hung)
				t0 := time.Now()
				code, body, err := p.Get(rctx, "/api/snowflake/get/blackhole")
				took := time.Since(t0)
				rcancel()
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					tl.conn(false, "/api/snowflake/get/blackhole", fmt.Errorf("after %v: %w", took.Round(time.Millisecond), err))
					continue
				}
				tl.record(false, code, body, took, "/api/snowflake/get/blackhole")
				if code != 200 {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	stop := func() { cancel(); wg.Wait() }
	defer stop()

	time.Sleep(time.Second) // healthy warm-up
	tl.startFault()
	px.Blackhole(t)
	firstErr := tl.waitFirstErr(t, faulted)
	time.Sleep(time.Until(time.Now().Add(faulted - firstErr)))
	readyFaulted := readyz(p)
	px.Clear(t)
	tl.endFault()
	rec := tl.waitRecovered(t, time.Second, 30*time.Second)
	stop()

	checkWorker(t, tl, worker)
	r := check(t, tl, nil, "")
	if len(r.Errors) == 0 {
		t.Errorf("no errors while the lease database was blackholed for %v past the TTL", faulted)
	}
	if r.Worst > bound {
		t.Errorf("slowest error answer %v, want within --wait-timeout %v + 0.5 s", r.Worst, wait)
	}
	if readyFaulted != 503 {
		t.Errorf("/readyz %d %v into the blackhole (past TTL - margin), want 503", readyFaulted, faulted)
	}
	r.Scenario = "4 snowflake worker IDs"
	r.Size = fmt.Sprintf("SQL lease (%s) blackholed (no answer, no close) for %v, past the 10 s TTL; %d clients; --wait-timeout %v", name, faulted, clients, wait)
	r.Recovery = fmtRecovery(rec)
	r.Cmd = "go test -race -count=1 -run '^TestSQLLeaseBlackhole$/^" + kind + "$' ./faults/"
	r.Note = fmt.Sprintf("first error %v after the fault began; every answer within %v (bound %v); /readyz %d while faulted", firstErr.Round(time.Millisecond), r.Worst.Round(time.Millisecond), bound, readyFaulted)
	report.add(t, r)
}
