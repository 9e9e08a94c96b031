package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/waittest"
)

// leafctlBin builds cmd/leafctl once (no -race: it is a one-shot CLI).
var leafctlBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "leafctl-faults-")
	if err != nil {
		return "", err
	}
	clockBinDirs = append(clockBinDirs, dir)
	bin := filepath.Join(dir, "leafctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/leaf-go/leaf/cmd/leafctl").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build leafctl: %v\n%s", err, out)
	}
	return bin, nil
})

// bufferState is one tag's entry of /api/v1/segment/buffers.
type bufferState struct {
	BizTag    string `json:"bizTag"`
	HighWater string `json:"highWater"`
	Refusing  bool   `json:"refusing"`
}

func buffer(t testing.TB, p *servertest.Proc, tag string) bufferState {
	t.Helper()
	code, body, err := p.Get(context.Background(), "/api/v1/segment/buffers")
	if err != nil || code != 200 {
		t.Fatalf("GET /api/v1/segment/buffers = %d %s %v", code, body, err)
	}
	var s struct{ Buffers []bufferState }
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("buffers %s: %v", body, err)
	}
	for _, b := range s.Buffers {
		if b.BizTag == tag {
			return b
		}
	}
	return bufferState{}
}

// metric returns the value of series on /metrics, "" when absent.
func metric(t testing.TB, p *servertest.Proc, series string) string {
	t.Helper()
	code, body, err := p.Get(context.Background(), "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics = %d %v", code, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// TestRestoredBackup: two servers share one leaf_alloc; the tag's row is put
// back to an old max_id, as a restore from a backup does (DELETE + INSERT of
// the dumped row), either with both servers down (kill -9, restart on the
// same data dirs: "restore") or while they run ("replica": a lagging replica
// promoted). Both servers must refuse the rewound segments (-3,
// leaf_segment_rewound 1) and never hand out an ID twice; once the tag is
// fenced with `leafctl tag fence` to the higher of the two servers'
// high-water marks, they serve again by themselves.
//
// The "replica" mode once repeated IDs (3,200 on MariaDB): the first server
// to notice burned one segment of its grown dynamic step, which carried
// max_id past the other server's lower mark. A read of max_id before
// allocating left a window between the read and the allocation (100 IDs
// repeated on MariaDB, 2026-12-07); now the allocating UPDATE itself
// carries the mark (store.Store.Allocate, store.ErrBelowMark), so both
// servers notice and nothing is burned.
func TestRestoredBackup(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []string{"restore", "replica"} {
				t.Run(mode, func(t *testing.T) {
					restoreDrill(t, kind, mode)
				})
			}
		})
	}
}

func restoreDrill(t *testing.T, kind, mode string) {
	const tag = "rb"
	d := newDB(t, kind)
	d.create(t, tag, 1, 50)
	dirs := []string{t.TempDir(), t.TempDir()}
	args := []string{"--segment-dsn", d.direct, "--migrate=false", "--snowflake=false"}
	var procs [2]atomic.Pointer[servertest.Proc]
	for i := range procs {
		procs[i].Store(start(t, dirs[i], args...))
	}
	var restarting atomic.Bool
	before := newTally(time.Second+slack, 10*time.Second)
	after := newTally(loadTimeout+slack, 10*time.Second) // first loads after a restart wait LoadTimeout
	var cur atomic.Pointer[tally]
	cur.Store(before)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range procs {
		for range 3 {
			wg.Go(func() {
				// One client, re-pointed at the "after" tally at the restore.
				for ctx.Err() == nil {
					tl := cur.Load()
					p := procs[i].Load()
					t0 := time.Now()
					status, body, err := p.Get(ctx, "/api/segment/get/"+tag)
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						// allowed while killing, or from a request to a killed process
						tl.conn(restarting.Load() || p != procs[i].Load(), "server "+strconv.Itoa(i), err)
						time.Sleep(5 * time.Millisecond)
						continue
					}
					tl.record(false, status, body, time.Since(t0), "/api/segment/get/"+tag)
					if status != 200 {
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
	}
	// The backup is taken once both servers serve; the restore comes once
	// both have allocated past it (their marks above the backup's max_id),
	// so that the restored row is behind each of them. Not after fixed
	// times: on a loaded machine a server may not have allocated by then.
	for i := range procs {
		waitInit(t, procs[i].Load(), tag, 30*time.Second)
	}
	old := d.maxID(t, tag) // the backup
	for i := range procs {
		waittest.For(t, 30*time.Second, fmt.Sprintf("server %d allocating past the backup's max_id %d", i, old), func() bool {
			hw, err := strconv.ParseInt(buffer(t, procs[i].Load(), tag).HighWater, 10, 64)
			return err == nil && hw > old
		})
	}
	if mode == "restore" {
		restarting.Store(true)
		for i := range procs {
			procs[i].Load().Kill9()
		}
	}
	cur.Store(after) // a request already sent records into "before" still
	preMax := restoreMax(t, d, tag, old)
	after.startFault()
	if mode == "restore" {
		for i := range procs {
			procs[i].Store(start(t, dirs[i], args...))
		}
		restarting.Store(false)
	}
	// Each server finds the rewound row at its next load and refuses it
	// (logged, leaf_segment_rewound 1), unless another server's refusal
	// (which burns one segment of that server's step) already carried max_id
	// past its mark: segment.go's documented limit.
	refused := 0
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		refused = 0
		for i := range procs {
			if strings.Contains(procs[i].Load().Logs(), "refusing tag") {
				refused++
			}
		}
		if refused == len(procs) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if refused == 0 {
		t.Fatalf("no server refused the rewound row within 15 s")
	}
	if mode == "restore" && refused < len(procs) {
		t.Errorf("only %d of %d restarted servers refused the rewound row", refused, len(procs))
	}
	rewound := 0
	for i := range procs {
		if metric(t, procs[i].Load(), `leaf_segment_rewound{biz_tag="`+tag+`"}`) == "1" {
			rewound++
		}
	}
	refusedAt := time.Since(after.faultFrom)
	// The highest mark read now is enough, with no settling time: a mark
	// rises only by an allocation, which a server makes only when max_id is
	// at or above its mark and which leaves max_id above the new one; and
	// the fence never lowers max_id.
	var mark int64
	for i := range procs {
		hw, err := strconv.ParseInt(buffer(t, procs[i].Load(), tag).HighWater, 10, 64)
		if err != nil {
			t.Fatalf("server %d highWater: %v", i, err)
		}
		mark = max(mark, hw)
	}
	fence(t, d, tag, mark)
	after.endFault()
	rec := after.waitRecovered(t, time.Second, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()

	r := check(t, mergeTallies(before, after), nil, "")
	if mode == "restore" && after.errs["500 -3"] == 0 {
		t.Errorf("no -3 after the restore")
	}
	// Every ID lies in a committed range (the ranges overlap after a restore).
	rs := d.auditRanges(t, tag)
	ids, _, _, _ := mergeTallies(before, after).snapshot()
	outside := 0
	for _, id := range ids {
		in := false
		for _, rg := range rs {
			if rg.Lo <= id && id < rg.Hi {
				in = true
				break
			}
		}
		if !in {
			outside++
		}
	}
	if outside > 0 {
		t.Errorf("%d IDs outside every committed range", outside)
	}
	r.Scenario = "2 database restored / replica behind"
	name := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB"}[kind]
	how := map[string]string{"restore": "restore from a backup, both servers kill -9 and restarted", "replica": "replica behind promoted while both servers run"}[mode]
	r.Size = fmt.Sprintf("%s, 2 servers, step 50, %s: max_id %d → %d", name, how, preMax, old)
	r.Recovery = fmtRecovery(rec) + " after the fence"
	r.Cmd = "go test -race -count=1 -run '^TestRestoredBackup$/^" + kind + "$/^" + mode + "$' ./faults/"
	r.Note = fmt.Sprintf("%d/2 servers refused (log), %d with leaf_segment_rewound 1 at the fence; fenced %v after the restore with leafctl to the higher mark %d; %d IDs before, %d after", refused, rewound, refusedAt.Round(time.Millisecond), mark, before.idCount(), after.idCount())
	if mode == "restore" {
		r.Note += "; conn = requests cut by the kill"
	}
	report.add(t, r)
}

// restoreMax puts tag's row back with max_id old: DELETE and INSERT in one
// transaction, as restoring a dump does (the audit trigger sees no UPDATE).
// It returns the max_id it replaced, read under the row's lock in that
// transaction.
func restoreMax(t testing.TB, d *db, tag string, old int64) (replaced int64) {
	t.Helper()
	q := func(s string) string {
		if d.kind == "postgres" {
			s = strings.Replace(s, "?", "$1", 1)
			s = strings.Replace(s, "?", "$2", 1)
		}
		return s
	}
	tx, err := d.raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var step int64
	if err := tx.QueryRow(q(`SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE`), tag).Scan(&replaced, &step); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(q(`DELETE FROM leaf_alloc WHERE biz_tag = ?`), tag); err != nil {
		t.Fatal(err)
	}
	ins := `INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, ?, ` + strconv.FormatInt(step, 10) + `)`
	if _, err := tx.Exec(q(ins), tag, old); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return replaced
}

// fence raises max_id of tag to at least mark with `leafctl tag fence`.
func fence(t testing.TB, d *db, tag string, mark int64) {
	t.Helper()
	bin, err := leafctlBin()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "tag", "fence", tag, "--min", strconv.FormatInt(mark, 10), "--dsn", d.direct).CombinedOutput()
	if err != nil {
		t.Fatalf("leafctl tag fence: %v\n%s", err, out)
	}
	if got := d.maxID(t, tag); got < mark {
		t.Fatalf("max_id after leafctl tag fence --min %d = %d", mark, got)
	}
}
