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

// TestKillDuringRefresh: one server on PostgreSQL through a fault proxy that
// delays every answer by 300 ms, with a tag list of 2,001 tags re-read every
// second (--refresh-interval 1s). A helper raises max_id of the 2,000 idle
// tags every 400 ms, so every refresh also raises and writes 2,000
// high-water marks into the data dir. The server is killed with -9 while a
// refresh is in flight — the refresh query is seen in pg_stat_activity, and
// the kill comes 0, 150 and 300 ms after it was sent (the answer is on its
// way for 300 ms; then the marks are written) — and restarted on the same
// data dir, 3 times, under load on the one served tag. The
// restarted server must start (its marks file readable), its first IDs lie
// above the max_id held at the kill, no ID repeats, and every ID lies in a
// committed range.
func TestKillDuringRefresh(t *testing.T) {
	t.Parallel()
	const (
		rounds = 3
		delay  = 300 * time.Millisecond
		tag    = "refreshed"
		idle   = 2000
	)
	d := newDB(t, "postgres")
	d.create(t, tag, 1, 20)
	if _, err := d.raw.Exec(`INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time)
		SELECT 'idle' || lpad(g::text, 5, '0'), 1, 100, now() FROM generate_series(1, $1::int) g`, idle); err != nil {
		t.Fatal(err)
	}
	px := faultproxy.Start(t, d.upstream())
	px.Delay(t, delay)
	dir := t.TempDir()

	bumpCtx, stopBump := context.WithCancel(context.Background())
	var bumps sync.WaitGroup
	bumps.Go(func() {
		for bumpCtx.Err() == nil {
			_, _ = d.raw.ExecContext(bumpCtx, `UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag LIKE 'idle%'`)
			select {
			case <-bumpCtx.Done():
			case <-time.After(400 * time.Millisecond):
			}
		}
	})
	defer func() { stopBump(); bumps.Wait() }()

	all := newTally(0, 0)
	var prevMax int64
	hits := 0
	var ages []time.Duration
	for round := range rounds {
		p := start(t, dir, "--segment-dsn", d.via(t, px), "--migrate=false", "--snowflake=false", "--refresh-interval", "1s")
		tl := newTally(loadTimeout+slack, 10*time.Second) // the first load after a restart may take LoadTimeout
		var killing atomic.Bool
		var targets []target
		for range 4 {
			targets = append(targets, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/" + tag, tally: tl, connOK: killing.Load})
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { drive(ctx, targets) })
		for deadline := time.Now().Add(10 * time.Second); tl.idCount() < 50 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		// Kill at a growing age of the refresh: from just sent to just
		// about answered (the rows arrive after delay, then the marks of
		// 2,000 tags are written).
		target := time.Duration(round) * delay / (rounds - 1)
		age, ok := waitRefreshInFlight(t, d, 100*time.Millisecond, 5*time.Second)
		seen := time.Now()
		time.Sleep(target - age)
		killing.Store(true)
		p.Kill9()
		if ok {
			age += time.Since(seen)
			if age < delay {
				hits++
			}
			ages = append(ages, age.Round(time.Millisecond))
		}
		cancel()
		wg.Wait()
		prevMax = endKillRound(t, round, tl, all, prevMax, func() int64 { return d.maxID(t, tag) })
	}
	// A last start on the data dir after the last kill: it must come up.
	p := start(t, dir, "--segment-dsn", d.via(t, px), "--migrate=false", "--snowflake=false", "--refresh-interval", "1s")
	last := newTally(loadTimeout+slack, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() {
		drive(ctx, []target{{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/" + tag, tally: last}})
	})
	for ctx.Err() == nil && last.idCount() < 50 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	ids, _, _, _ := last.snapshot()
	if len(ids) == 0 {
		t.Errorf("the server restarted after the last kill served no ID")
	}
	for _, id := range ids {
		if id < prevMax {
			t.Errorf("after the last restart: ID %d is below max_id %d held at the kill", id, prevMax)
			break
		}
	}
	all.ids = append(all.ids, ids...)
	if hits == 0 {
		t.Errorf("no kill landed while a refresh was in flight (ages at the kills %v)", ages)
	}
	r := check(t, all, d, tag)
	r.Scenario, r.Recovery = "3 process killed", "restart"
	r.Size = fmt.Sprintf("PostgreSQL +%v per answer, kill -9 during a tag refresh (2,001 tags, refresh every 1 s, 2,000 marks raised per refresh), %d kills, step 20", delay, rounds)
	r.Note = fmt.Sprintf("%d/%d kills landed while the refresh query's answer was on its way (query sent %v before the kills; the rows arrive after %v, then the marks are written); every restart read its marks file and served above the max_id at the kill; conn = request cut by the kill", hits, rounds, ages, delay)
	report.add(t, r)
}

// waitRefreshInFlight polls pg_stat_activity of d's database until the tag
// refresh query (store/postgres Rows) has been sent less than fresh ago by
// the database's clock, and returns that age; false after limit. With the
// proxy delaying answers by more than fresh, the server is then inside
// Refresh, waiting for the rows.
func waitRefreshInFlight(t testing.TB, d *db, fresh, limit time.Duration) (time.Duration, bool) {
	t.Helper()
	var last time.Time
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		var started time.Time
		var ageMs float64
		err := d.raw.QueryRow(`SELECT query_start, EXTRACT(EPOCH FROM clock_timestamp() - query_start) * 1000
			FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			  AND query LIKE 'SELECT a.biz_tag, a.max_id, a.step, a.description, a.update_time%'
			ORDER BY query_start DESC LIMIT 1`).Scan(&started, &ageMs)
		if err == nil && !started.Equal(last) {
			age := time.Duration(ageMs * float64(time.Millisecond))
			if !last.IsZero() && age < fresh {
				return age, true
			}
			last = started // the first sighting may be an old refresh
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, false
}
