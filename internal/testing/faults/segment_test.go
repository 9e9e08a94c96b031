package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/internal/waittest"
)

// slack is added to every configured time bound: the servers, the databases
// and the clients share two CPUs, and the servers run with -race.
const slack = 1500 * time.Millisecond

// loadTimeout is segment.DefaultLoadTimeout: the first segment of a tag is
// waited for up to this long instead of --wait-timeout.
const loadTimeout = 5 * time.Second

// serializationRe matches what the servers log when the database refused an
// allocation because of a concurrent one (PostgreSQL 40001, MariaDB
// deadlock 1213 or lock wait timeout 1205).
var serializationRe = regexp.MustCompile(`(?i)40001|could not serialize|deadlock|1213|1205`)

// TestManyServersOneDatabase: 3–4 servers share one leaf_alloc under the
// default isolation and under SERIALIZABLE, with tiny steps (1, 2), a huge
// step (1,000,000) and batch bursts of 10,000 IDs on step 10 (larger than
// both buffers). A serialization failure may fail a load; it must never
// produce a duplicate.
func TestManyServersOneDatabase(t *testing.T) {
	tests := []struct {
		name, kind, isolation string
		servers               int
	}{
		{"postgres-read-committed", "postgres", "", 4},
		{"postgres-serializable", "postgres", "serializable", 3},
		{"mariadb-repeatable-read", "mysql", "", 4},
		{"mariadb-serializable", "mysql", "SERIALIZABLE", 3},
	}
	tags := []struct {
		name  string
		step  int64
		batch bool
	}{
		{"tiny1", 1, false},
		{"tiny2", 2, false},
		{"huge", 1_000_000, false},
		{"burst", 10, true},
	}
	const singleClients, batchClients, run = 15, 3, 4 * time.Second
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDB(t, tt.kind)
			dsnStr := d.direct
			if tt.isolation != "" {
				dsnStr = withIsolation(t, d, tt.isolation)
			}
			for _, tg := range tags {
				d.create(t, tg.name, 1, tg.step)
			}
			var servers []*servertest.Proc
			for range tt.servers {
				servers = append(servers, start(t, t.TempDir(), "--segment-dsn", dsnStr, "--migrate=false", "--snowflake=false"))
			}
			tallies := map[string]*tally{}
			for _, tg := range tags {
				tallies[tg.name] = newTally(time.Second+slack, 10*time.Second)
			}
			var targets []target
			singles := []string{"tiny1", "tiny2", "huge"}
			for c := range singleClients {
				// every tag on every server: the tag varies fastest
				srv, tag := servers[(c/len(singles))%len(servers)], singles[c%len(singles)]
				targets = append(targets, target{srv: func() *servertest.Proc { return srv }, path: "/api/segment/get/" + tag, tally: tallies[tag]})
			}
			for c := range batchClients {
				srv := servers[(c+1)%len(servers)]
				targets = append(targets, target{srv: func() *servertest.Proc { return srv }, path: "/api/v1/segment/burst?count=10000", batch: true, tally: tallies["burst"]})
			}
			ctx, cancel := context.WithTimeout(context.Background(), run)
			defer cancel()
			drive(ctx, targets)

			refused := 0
			for _, s := range servers {
				refused += len(serializationRe.FindAllString(s.Logs(), -1))
			}
			iso := tt.isolation
			if iso == "" {
				iso = map[string]string{"postgres": "read committed", "mysql": "repeatable read"}[tt.kind]
			}
			for _, tg := range tags {
				r := check(t, tallies[tg.name], d, tg.name)
				r.Scenario = "1 many servers, one database"
				db := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[tt.kind]
				r.Size = fmt.Sprintf("%s %s, %d servers, step %d", db, strings.ToLower(iso), tt.servers, tg.step)
				if tg.batch {
					r.Size += ", batches of 10,000"
				}
				r.Recovery = "n/a"
				r.Cmd = "go test -race -count=1 -run '^TestManyServersOneDatabase$/^" + tt.name + "$' ./faults/"
				r.Note = fmt.Sprintf("%d committed segments", len(d.ranges(t, tg.name)))
				if tg.name == "tiny1" {
					r.Note += fmt.Sprintf("; %d serialization/deadlock refusals logged (all tags)", refused)
				}
				report.add(t, r)
			}
		})
	}
}

// withIsolation returns d's DSN with every new session at isolation level
// iso: for PostgreSQL by ALTER DATABASE … SET default_transaction_isolation,
// for MariaDB by the tx_isolation session variable in the DSN (MariaDB has no
// per-database default). It checks that a new session really gets it.
func withIsolation(t *testing.T, d *db, iso string) string {
	t.Helper()
	switch d.kind {
	case "postgres":
		u, err := url.Parse(d.direct)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(u.Path, "/")
		if _, err := d.raw.Exec(`ALTER DATABASE ` + name + ` SET default_transaction_isolation = '` + iso + `'`); err != nil {
			t.Fatal(err)
		}
		fresh := openRaw(t, "pgx", d.direct)
		var got string
		if err := fresh.QueryRow(`SHOW default_transaction_isolation`).Scan(&got); err != nil || got != iso {
			t.Fatalf("new session isolation = %q, %v; want %q", got, err, iso)
		}
		return d.direct
	default:
		sep := "?"
		if strings.Contains(d.direct, "?") {
			sep = "&"
		}
		out := d.direct + sep + "tx_isolation=" + url.QueryEscape("'"+iso+"'")
		fresh := openRaw(t, "mysql", strings.TrimPrefix(out, "mysql://"))
		var got string
		if err := fresh.QueryRow(`SELECT @@tx_isolation`).Scan(&got); err != nil || got != strings.ReplaceAll(iso, " ", "-") {
			t.Fatalf("new session isolation = %q, %v; want %q", got, err, iso)
		}
		return out
	}
}

// TestDatabaseSlowThenDown: one server behind a fault proxy to the database.
// The database becomes slow (200 ms, then 1 s added to every answer, for
// 3 s each), then goes down until the buffered runway is spent and for 1 s
// or 5 s longer, then comes back. While it is down no ID may come from a
// range reserved after the cut; failures are Leaf -3 within --wait-timeout;
// the server recovers by itself.
func TestDatabaseSlowThenDown(t *testing.T) {
	t.Parallel()
	const wait = 500 * time.Millisecond
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := newDB(t, kind)
			px := faultproxy.Start(t, d.upstream())
			phases := []struct {
				tag   string
				delay time.Duration // slow phase when > 0
				down  time.Duration // extra time down after the runway is spent
			}{
				{tag: "slow200ms", delay: 200 * time.Millisecond},
				{tag: "slow1s", delay: time.Second},
				{tag: "down1s", down: time.Second},
				{tag: "down5s", down: 5 * time.Second},
			}
			for _, ph := range phases {
				d.create(t, ph.tag, 1, 100)
			}
			p := start(t, t.TempDir(), "--segment-dsn", d.via(t, px), "--migrate=false", "--snowflake=false",
				"--wait-timeout", wait.String())
			name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
			for _, ph := range phases {
				tl := newTally(wait+slack, 10*time.Second)
				var ceiling atomic.Int64 // while down, every ID must be below it
				var targets []target
				for range 8 {
					targets = append(targets, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/" + ph.tag, tally: tl})
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Go(func() { drive(ctx, targets) })
				time.Sleep(time.Second) // healthy warm-up
				r := row{Scenario: "2 database slow / down"}
				var runway time.Duration
				tl.startFault()
				if ph.delay > 0 {
					px.Delay(t, ph.delay)
					time.Sleep(3 * time.Second)
					px.ClearDelay(t)
					r.Size = fmt.Sprintf("%s, +%v per answer for 3 s, wait-timeout %v", name, ph.delay, wait)
				} else {
					// Cut returns once every proxied connection is closed: the
					// server hears of no commit after it, so max_id now bounds
					// every ID it can hand out (a statement that commits later
					// raises max_id past IDs nobody was given). No settling time.
					px.Cut()
					ceiling.Store(d.maxID(t, ph.tag))
					runway = tl.waitFirstErr(t, 60*time.Second)
					time.Sleep(ph.down)
					ids, _, _, _ := tl.snapshot()
					for _, id := range ids {
						if c := ceiling.Load(); id >= c {
							t.Errorf("ID %d handed out while the database was down, but max_id was %d", id, c)
							break
						}
					}
					ceiling.Store(0)
					px.Restore(t)
					r.Size = fmt.Sprintf("%s down: runway %v spent, then %v more; wait-timeout %v", name, runway.Round(time.Millisecond), ph.down, wait)
				}
				tl.endFault()
				rec := tl.waitRecovered(t, time.Second, 20*time.Second)
				cancel()
				wg.Wait()
				got := check(t, tl, d, ph.tag)
				got.Scenario, got.Size, got.Recovery = r.Scenario, r.Size, fmtRecovery(rec)
				got.Cmd = "go test -race -count=1 -run '^TestDatabaseSlowThenDown$/^" + kind + "$' ./faults/"
				if ph.down > 0 && got.Errors["500 -3"] == 0 {
					t.Errorf("%s: the database was down past the runway but no request failed with -3", ph.tag)
				}
				report.add(t, got)
			}
		})
	}
}

// TestKillNine: one server on a data directory, restarted after every
// kill, under load from 8 clients. Modes: kill -9 at a random moment; kill
// -9 while a segment load is in flight (the database slowed by 150 ms so the
// kill lands inside it; the buffers API tells when); SIGTERM then SIGKILL
// 0–40 ms later (killed during shutdown). No ID may repeat across restarts,
// and the first IDs after a restart lie above the max_id the database held
// at the kill.
func TestKillNine(t *testing.T) {
	t.Parallel()
	const rounds = 5
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []string{"random", "mid-load", "shutdown"} {
				t.Run(mode, func(t *testing.T) { killRounds(t, kind, mode, rounds) })
			}
		})
	}
}

func killRounds(t *testing.T, kind, mode string, rounds int) {
	d := newDB(t, kind)
	const tag = "k9"
	d.create(t, tag, 1, 20)
	dsnStr := d.direct
	if mode == "mid-load" {
		px := faultproxy.Start(t, d.upstream())
		px.Delay(t, 150*time.Millisecond)
		dsnStr = d.via(t, px)
	}
	dir := t.TempDir() // the same data directory for every restart
	all := newTally(time.Second+slack, 10*time.Second)
	var prevMax int64
	midLoad := 0
	for round := range rounds {
		// --return-tail=false: the audit below reads every committed UPDATE as a
		// range that only grows; a graceful stop's tail return lowers max_id
		// (its own fault test is TestTailReturn).
		p := start(t, dir, "--segment-dsn", dsnStr, "--migrate=false", "--snowflake=false", "--return-tail=false")
		tl := newTally(loadTimeout+slack, 10*time.Second) // the first load after a restart may take LoadTimeout
		var killing atomic.Bool
		var targets []target
		for range 8 {
			targets = append(targets, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/" + tag,
				tally: tl, connOK: killing.Load})
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { drive(ctx, targets) })
		// The kill lands at a random moment after the first ID: on a loaded
		// machine a restarted server may need a while for its first load, and
		// a round that served nothing tests nothing.
		for deadline := time.Now().Add(10 * time.Second); tl.idCount() < 1 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(600)) * time.Millisecond)
		switch mode {
		case "random":
			killing.Store(true)
			p.Kill9()
		case "mid-load":
			// Past the first load (which a kill would also hit, but then no
			// ID would be served in the round), then at the next load.
			for deadline := time.Now().Add(10 * time.Second); tl.idCount() < 100 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if waitLoading(p, tag, 3*time.Second) {
				midLoad++
			}
			killing.Store(true)
			p.Kill9()
		case "shutdown":
			killing.Store(true)
			_ = p.Signal(syscall.SIGTERM)
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
			p.Kill9()
		}
		cancel()
		wg.Wait()
		prevMax = endKillRound(t, round, tl, all, prevMax, func() int64 { return d.maxID(t, tag) })
	}
	r := check(t, all, d, tag)
	r.Scenario = "3 process killed"
	name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
	r.Size = fmt.Sprintf("%s, %s, %d kills, step 20", name, map[string]string{
		"random":   "kill -9 at a random moment",
		"mid-load": "kill -9 during a segment load (DB +150 ms)",
		"shutdown": "SIGTERM then SIGKILL after 0–40 ms",
	}[mode], rounds)
	r.Recovery = "restart"
	r.Cmd = "go test -race -count=1 -run '^TestKillNine$/^" + kind + "$/^" + mode + "$' ./faults/"
	r.Note = "conn = request cut by the kill"
	if mode == "mid-load" {
		r.Note += fmt.Sprintf("; %d/%d kills landed while the buffers API showed a load in flight", midLoad, rounds)
		if midLoad == 0 {
			t.Errorf("no kill landed during a load")
		}
	}
	report.add(t, r)
}

// waitNoLoad waits until p shows no load of tag in flight, failing t after
// limit. Seen after a fault began, it says that every load started before
// the fault has ended: a tag loads one segment at a time.
func waitNoLoad(t testing.TB, p *servertest.Proc, tag string, limit time.Duration) {
	t.Helper()
	waittest.For(t, limit, "no load of "+tag+" in flight", func() bool {
		b, ok := buffersOf(p, tag)
		return ok && !b.Loading
	})
}

// waitLoading polls the buffers API until tag shows a load in flight; false
// after limit.
func waitLoading(p *servertest.Proc, tag string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		status, body, err := p.Get(context.Background(), "/api/v1/segment/buffers")
		if err == nil && status == 200 {
			var s struct {
				Buffers []struct {
					BizTag  string `json:"bizTag"`
					Loading bool   `json:"loading"`
				} `json:"buffers"`
			}
			if json.Unmarshal([]byte(body), &s) == nil {
				for _, b := range s.Buffers {
					if b.BizTag == tag && b.Loading {
						return true
					}
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}
