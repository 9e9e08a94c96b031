package faults

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store/dsn"
)

// sqliteDB is a db on the SQLite file at path: leaf_alloc migrated, tags
// created by create before the servers start, and the audit trigger
// installed. raw waits up to 5 s for a server's write lock.
func sqliteDB(t testing.TB, path string, tags map[string]int64) *db {
	t.Helper()
	d := &db{kind: "sqlite", direct: "sqlite:" + path}
	st, err := dsn.Open(context.Background(), d.direct, true)
	if err != nil {
		t.Fatalf("open %s: %v", d.direct, err)
	}
	d.st = st
	for tag, step := range tags {
		d.create(t, tag, 1, step)
	}
	st.Close() // the servers are the only writers from here on
	d.st = nil
	d.raw = openRaw(t, "sqlite", path+"?_pragma=busy_timeout(5000)")
	dbtest.InstallSQLiteAudit(t, d.raw)
	return d
}

// TestSQLiteKillNine: one server on the embedded SQLite store (its default:
// the file in the data directory, next to the high-water marks), restarted
// after every kill -9 under load from 8 clients. Modes: a random moment;
// during a segment load (the test holds SQLite's write lock from its own
// connection until the buffers API shows the server's allocation waiting
// for it, releases it and kills the server as soon as max_id has moved: the
// allocation is committed, its mark is being written or was just written,
// no ID of it is handed out yet or only a few). No ID may repeat across
// restarts, every ID lies in a range a committed UPDATE reserved (audit
// trigger on the SQLite file), and the first IDs after a restart lie at or
// above the max_id the file held at the kill.
func TestSQLiteKillNine(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"random", "mid-load"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			sqliteKillRounds(t, mode, 4)
		})
	}
}

func sqliteKillRounds(t *testing.T, mode string, rounds int) {
	const tag = "k9"
	dataDir := filepath.Join(t.TempDir(), "data")
	d := sqliteDB(t, filepath.Join(dataDir, "leaf.db"), map[string]int64{tag: 20})
	args := []string{"--data-dir", dataDir, "--migrate=false", "--snowflake=false"}
	all := newTally(time.Second+slack, 10*time.Second)
	var prevMax int64
	midLoad, atCommit := 0, 0
	for round := range rounds {
		p := start(t, t.TempDir(), args...)
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
		for deadline := time.Now().Add(10 * time.Second); tl.idCount() < 1 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(600)) * time.Millisecond)
		if mode == "mid-load" {
			before, seen := holdWriteLockUntilLoading(t, d.raw, p, tag, 5*time.Second)
			if seen {
				midLoad++
			}
			// Kill as soon as the allocation has committed: while the
			// server writes the mark, or just after.
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
				if d.maxID(t, tag) != before {
					atCommit++
					break
				}
			}
		}
		killing.Store(true)
		p.Kill9()
		cancel()
		wg.Wait()
		prevMax = endKillRound(t, round, tl, all, prevMax, func() int64 { return d.maxID(t, tag) })
	}
	r := check(t, all, d, tag)
	r.Scenario = "3 process killed"
	r.Size = fmt.Sprintf("SQLite (data dir), %s, %d kills, step 20", map[string]string{
		"random":   "kill -9 at a random moment",
		"mid-load": "kill -9 right after an allocation committed (polled max_id)",
	}[mode], rounds)
	r.Recovery = "restart"
	r.Cmd = "go test -race -count=1 -run '^TestSQLiteKillNine$/^" + mode + "$' ./faults/"
	r.Note = "conn = request cut by the kill"
	if mode == "mid-load" {
		r.Note += fmt.Sprintf("; %d/%d kills followed a load seen waiting for the lock, %d/%d landed right after its commit", midLoad, rounds, atCommit, rounds)
		if midLoad == 0 || atCommit == 0 {
			t.Errorf("no kill landed during a load")
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(dataDir, ".segment-marks.json.tmp-*")); len(tmp) > 0 {
		r.Note += fmt.Sprintf("; %d temporary marks files left by the last kill", len(tmp))
		// The next start sweeps them when it loads the marks, before listening.
		start(t, t.TempDir(), args...).Kill9()
		if left, _ := filepath.Glob(filepath.Join(dataDir, ".segment-marks.json.tmp-*")); len(left) > 0 {
			t.Errorf("after a restart %d temporary marks files are still there: %q", len(left), left)
		} else {
			r.Note += ", removed by the next start"
		}
	}
	report.add(t, r)
}

// holdWriteLockUntilLoading takes SQLite's write lock (BEGIN IMMEDIATE on
// its own connection), reads the max_id of tag (which nobody else can
// change now), waits until p's buffers API shows a load of tag in flight
// after the first segment (the allocation waits for the lock), and releases
// the lock. It returns the max_id and whether a load was seen within limit.
func holdWriteLockUntilLoading(t testing.TB, raw *sql.DB, p *servertest.Proc, tag string, limit time.Duration) (int64, bool) {
	t.Helper()
	ctx := context.Background()
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	var maxID int64
	if err := conn.QueryRowContext(ctx, `SELECT max_id FROM leaf_alloc WHERE biz_tag = ?`, tag).Scan(&maxID); err != nil {
		t.Fatalf("read max_id of %q: %v", tag, err)
	}
	seen := waitLoadingAny([]*servertest.Proc{p}, tag, limit)
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatalf("release the write lock: %v", err)
	}
	return maxID, seen >= 0
}

// TestSQLiteTwoServers: two leaf-server processes on one SQLite file, which
// the store allows (SQLite's file lock serialises them, BEGIN IMMEDIATE,
// 5 s busy timeout), with their own data directories (--segment-dsn to the
// shared file). Started with the same --data-dir (the file and the
// high-water marks file shared), the second is refused: leaf-server locks
// its data dir, so it must exit 1 before listening, naming the dir and the
// first server's PID; the first then serves alone and its marks file must
// never go backwards. 4 clients per server, step 20, 3 s. IDs must stay
// unique and inside committed ranges.
func TestSQLiteTwoServers(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"own-data-dirs", "shared-data-dir"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			const tag = "two"
			shared := filepath.Join(t.TempDir(), "data")
			d := sqliteDB(t, filepath.Join(shared, "leaf.db"), map[string]int64{tag: 20})
			var servers []*servertest.Proc
			var refusedNote string
			for range 2 {
				args := []string{"--data-dir", shared, "--migrate=false", "--snowflake=false"}
				if mode == "own-data-dirs" {
					args = []string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--segment-dsn", d.direct,
						"--migrate=false", "--snowflake=false"}
				}
				if mode == "shared-data-dir" && len(servers) == 1 {
					refusedNote = refusedSecond(t, servers[0], shared, args)
					break
				}
				servers = append(servers, start(t, t.TempDir(), args...))
			}
			tl := newTally(time.Second+slack, 10*time.Second)
			var targets []target
			for _, p := range servers {
				for range 4 {
					targets = append(targets, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/" + tag, tally: tl})
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			var backward int
			var worst [2]int64
			var wg sync.WaitGroup
			if mode == "shared-data-dir" {
				wg.Go(func() { backward, worst = watchMark(ctx, filepath.Join(shared, marksLog), tag) })
			}
			drive(ctx, targets)
			wg.Wait()

			var highs []int64
			for _, p := range servers {
				hw, err := strconv.ParseInt(buffer(t, p, tag).HighWater, 10, 64)
				if err != nil {
					t.Fatalf("high-water mark of %s: %v", p.Addr(), err)
				}
				highs = append(highs, hw)
			}
			busy := 0
			for _, p := range servers {
				busy += strings.Count(p.Logs(), "SQLITE_BUSY") + strings.Count(p.Logs(), "database is locked")
			}
			r := check(t, tl, d, tag)
			r.Scenario = "1 many servers, one database"
			r.Size = "SQLite, 2 servers on one file, " + map[string]string{
				"own-data-dirs":   "own data directories",
				"shared-data-dir": "the same --data-dir: the second refused, the first alone",
			}[mode] + ", step 20, 3 s"
			r.Recovery = "n/a"
			r.Cmd = "go test -race -count=1 -run '^TestSQLiteTwoServers$/^" + mode + "$' ./faults/"
			r.Note = fmt.Sprintf("%d committed segments; %d SQLITE_BUSY logged; server marks %v", len(d.ranges(t, tag)), busy, highs)
			if mode == "shared-data-dir" {
				file := fileMark(t, filepath.Join(shared, marksLog), tag)
				r.Note += fmt.Sprintf(", marks file %d at the end; %s", file, refusedNote)
				if file < highs[0] || backward > 0 {
					t.Errorf("marks file %d at the end (server's mark %d), went backwards %d times (e.g. %d after %d); want never below the server's",
						file, highs[0], backward, worst[0], worst[1])
				}
			}
			report.add(t, r)
		})
	}
}

// refusedSecond starts a second leaf-server with args (the --data-dir of
// first) and checks that it exits 1 before listening, naming dataDir and
// first's PID. It returns a note for the report.
func refusedSecond(t *testing.T, first *servertest.Proc, dataDir string, args []string) string {
	t.Helper()
	m := regexp.MustCompile(`msg="locked data dir" dir=\S+ pid=(\d+)`).FindStringSubmatch(first.Logs())
	if m == nil {
		t.Fatalf("first server logged no \"locked data dir\" line:\n%s", first.Logs())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "LEAF_LOG_FORMAT=text")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(t0)
	want := "data dir in use by another leaf-server: " + dataDir + " is locked by process " + m[1]
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), want) || strings.Contains(string(out), "msg=listening") {
		t.Fatalf("second leaf-server on the same --data-dir: %v\n%s\nwant exit status 1 before listening, saying %q", err, out, want)
	}
	return fmt.Sprintf("second server on the same --data-dir refused (exit 1 after %v, naming the dir and PID %s)", took.Round(time.Millisecond), m[1])
}

// fileMark reads the mark of tag from a marks log; 0 when absent.
func fileMark(t testing.TB, path, tag string) int64 {
	t.Helper()
	v, err := readMark(path, tag)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func readMark(path, tag string) (int64, error) {
	m, err := segment.ReadMarksLog(path)
	if err != nil {
		return 0, err
	}
	return m[tag], nil
}

// watchMark polls the mark of tag in a marks log every 2 ms until ctx
// ends and returns how often it was lower than a mark read before it, and
// the lowest such reading below the highest seen then.
func watchMark(ctx context.Context, path, tag string) (backward int, worst [2]int64) {
	var high int64
	for ctx.Err() == nil {
		if v, err := readMark(path, tag); err == nil {
			if v < high {
				backward++
				if high-v > worst[1]-worst[0] {
					worst = [2]int64{v, high}
				}
			}
			high = max(high, v)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return backward, worst
}
