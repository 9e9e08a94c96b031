package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/faultproxy"
	"github.com/leaf-go/leaf/internal/servertest"
)

// TestSQLLeaseMariaDB is the SQL lease worker-ID source under faults on
// MariaDB (TestSQLLeaseLost and TestSQLLeaseKillDuringRenewal do it on
// PostgreSQL); MariaDB renews in four round trips (BEGIN, UPDATE, SELECT,
// COMMIT) instead of one.
//
//   - lost: servers A (through a fault proxy) and B. A is cut for 3 s
//     (inside the 10 s TTL) and serves again by itself; then cut past the
//     TTL: A must refuse before the TTL ends, a server C started after the
//     TTL takes A's worker ID, and from then on A must not answer a single
//     snowflake ID (fencing: A's lease is expired locally, and lost for
//     good when the database comes back: /readyz 503).
//   - kill: one server whose database answers come 200 ms late is killed
//     with -9 while a request waits on a lease renewal (the high-water
//     store), restarted on the same data dir twice, then once more after
//     the TTL (taking the first worker ID back with the row's mark).
//
// No snowflake ID repeats.
func TestSQLLeaseMariaDB(t *testing.T) {
	t.Parallel()
	t.Run("lost", func(t *testing.T) {
		t.Parallel()
		d := newDB(t, "mysql")
		px := faultproxy.Start(t, d.upstream())
		args := []string{"--segment=false", "--worker-id-source", "sql"}
		a := start(t, t.TempDir(), append(args, "--segment-dsn", d.via(t, px))...)
		b := start(t, t.TempDir(), append(args, "--segment-dsn", d.direct)...)
		wa, wb := status(t, a).WorkerID, status(t, b).WorkerID
		if wa == wb {
			t.Fatalf("A and B share worker ID %d", wa)
		}
		newT := func() *tally { return newTally(time.Second+slack, 10*time.Second) }
		cmd := "go test -race -count=1 -run '^TestSQLLeaseMariaDB$/^lost$' ./faults/"

		// inside the TTL
		short, shortB := newT(), newT()
		stopA := sfSingles(func() *servertest.Proc { return a }, short, 2, nil)
		stopB := sfSingles(func() *servertest.Proc { return b }, shortB, 2, nil)
		time.Sleep(time.Second)
		short.startFault()
		px.Cut()
		time.Sleep(3 * time.Second)
		px.Restore(t)
		short.endFault()
		rec := short.waitRecovered(t, time.Second, 15*time.Second)
		stopA()
		stopB()
		checkWorker(t, short, wa)
		checkWorker(t, shortB, wb)
		if w := status(t, a).WorkerID; w != wa {
			t.Errorf("A's worker ID changed to %d after a short cut", w)
		}
		if _, errs, _, _ := shortB.snapshot(); len(errs) > 0 {
			t.Errorf("server B (not cut) had errors %v", errs)
		}
		r := check(t, mergeTallies(short, shortB), nil, "")
		r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, fmtRecovery(rec)
		r.Size = "SQL lease (MariaDB), 2 servers, A cut from the database for 3 s (inside the 10 s TTL)"
		r.Note = fmt.Sprintf("A keeps worker %d (/readyz %d after), B %d", wa, readyz(a), wb)
		report.add(t, r)

		// past the TTL
		ta, tb, tc := newT(), newT(), newT()
		stopA = sfSingles(func() *servertest.Proc { return a }, ta, 2, nil)
		stopB = sfSingles(func() *servertest.Proc { return b }, tb, 2, nil)
		time.Sleep(time.Second)
		ta.startFault()
		px.Cut()
		cut := time.Now()
		failAfter := ta.waitFirstErr(t, 12*time.Second)
		if failAfter >= 10*time.Second {
			t.Errorf("server A failed %v after the cut, want before the 10 s TTL", failAfter)
		}
		time.Sleep(time.Until(cut.Add(10500 * time.Millisecond)))
		readyPastTTL := readyz(a)
		if readyPastTTL != 503 {
			t.Errorf("server A: /readyz %d past the lease TTL with the database cut, want 503", readyPastTTL)
		}
		c := start(t, t.TempDir(), append(args, "--segment-dsn", d.direct)...)
		wc := status(t, c).WorkerID
		aAtC := ta.idCount()
		stopC := sfSingles(func() *servertest.Proc { return c }, tc, 2, nil)
		px.Restore(t)
		restored := time.Now()
		lostAfter := time.Duration(-1)
		for time.Since(restored) < 10*time.Second {
			if leaseLost(a) {
				lostAfter = time.Since(restored)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if lostAfter < 0 && wc == wa {
			t.Errorf("server A: lease not lost within 10 s after its worker ID %d went to server C", wa)
		}
		time.Sleep(time.Second)
		stopA()
		stopB()
		stopC()
		if n := ta.idCount() - aAtC; n > 0 && wc == wa {
			t.Errorf("server A answered %d snowflake IDs after C took its worker ID %d", n, wa)
		}
		if wc == wb {
			t.Errorf("server C took worker ID %d, which live server B holds", wc)
		}
		checkWorker(t, ta, wa)
		checkWorker(t, tb, wb)
		checkWorker(t, tc, wc)
		if _, errs, _, _ := tb.snapshot(); len(errs) > 0 {
			t.Errorf("server B (not cut) had errors %v", errs)
		}
		r = check(t, mergeTallies(short, shortB, ta, tb, tc), nil, "")
		r.Scenario, r.Cmd, r.Recovery = "4 snowflake worker IDs", cmd, "A: lost for good (restart)"
		r.Size = "SQL lease (MariaDB), 3 servers, A cut from the database past the 10 s TTL, C started after it"
		r.Note = fmt.Sprintf("A (worker %d) failing %v after the cut, /readyz %d past the TTL; C took worker %d, B %d; A answered %d IDs after C's start; A's lease lost %v after the database came back",
			wa, failAfter.Round(time.Millisecond), readyPastTTL, wc, wb, ta.idCount()-aAtC, lostAfter.Round(time.Millisecond))
		report.add(t, r)
	})

	t.Run("kill", func(t *testing.T) {
		t.Parallel()
		const delay = 200 * time.Millisecond
		const kills = 2
		d := newDB(t, "mysql")
		px := faultproxy.Start(t, d.upstream())
		dir := t.TempDir()
		args := []string{"--segment=false", "--worker-id-source", "sql", "--segment-dsn", d.via(t, px)}
		var all []*tally
		var workers []int64
		hits := 0
		var lastKill time.Time
		for round := 0; round <= kills; round++ {
			if round == kills {
				time.Sleep(time.Until(lastKill.Add(10500 * time.Millisecond))) // the first worker ID is free again
			}
			px.ClearDelay(t)
			p := start(t, dir, args...)
			px.Delay(t, delay)
			workers = append(workers, status(t, p).WorkerID)
			// A store waits on a renewal: 4 round trips, each delayed.
			tl := newTally(4*delay+time.Second+slack, 10*time.Second)
			all = append(all, tl)
			var killing sync.Mutex
			dead := false
			connOK := func() bool { killing.Lock(); defer killing.Unlock(); return dead }
			stop := sfSingles(func() *servertest.Proc { return p }, tl, 3, connOK)
			for deadline := time.Now().Add(10 * time.Second); tl.idCount() < 100 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if round < kills && killDuringWait(p, delay, 15*time.Second) {
				hits++
			}
			killing.Lock()
			dead = true
			killing.Unlock()
			p.Kill9()
			lastKill = time.Now()
			stop()
			checkWorker(t, tl, workers[round])
		}
		if hits == 0 {
			t.Errorf("no kill landed while a request waited on a renewal")
		}
		r := check(t, mergeTallies(all...), nil, "")
		r.Scenario, r.Recovery = "3 process killed", "restart"
		r.Cmd = "go test -race -count=1 -run '^TestSQLLeaseMariaDB$/^kill$' ./faults/"
		r.Size = fmt.Sprintf("SQL lease source (MariaDB +%v per answer), kill -9 during a lease renewal, %d kills, then a restart after the TTL", delay, kills)
		r.Note = fmt.Sprintf("%d/%d kills landed while a request waited on the renewal (high-water store); worker IDs by round %v; conn = request cut by the kill", hits, kills, workers)
		report.add(t, r)
	})
}

// killDuringWait sends probe requests to p until one is still unanswered
// after wait/2 (the generator blocks on a high-water store, i.e. a lease
// renewal whose answers the proxy delays) and reports whether that
// happened within limit. The caller kills p right after.
func killDuringWait(p *servertest.Proc, wait, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _, _ = p.Get(context.Background(), "/api/snowflake/get/probe")
		}()
		select {
		case <-done:
		case <-time.After(wait / 2):
			return true
		}
	}
	return false
}

// leaseLost reports whether p's SQL lease is lost for good (status API).
func leaseLost(p *servertest.Proc) bool {
	code, body, err := p.Get(context.Background(), "/api/v1/snowflake/status")
	if err != nil || code != 200 {
		return false
	}
	var s struct {
		SourceState struct{ Lost bool } `json:"sourceState"`
	}
	return json.Unmarshal([]byte(body), &s) == nil && s.SourceState.Lost
}
