package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// leafctlBin builds cmd/leafctl once; "" when it does not build.
var leafctlBin = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "leafctl-e2e-")
	if err != nil {
		return ""
	}
	bin := filepath.Join(dir, "leafctl")
	if out, err := exec.Command("go", "build", "-o", bin, "../leafctl").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build leafctl: %v\n%s", err, out)
		return ""
	}
	return bin
})

// TestRestoreDrill is docs/contract.md §2.6's restore safety on real servers: take IDs,
// dump the leaf_alloc row, take more IDs, restore the dump, restart the
// server on the same data directory. The tag must answer -3 with a clear log
// line until it is fenced to the server's high-water mark (through the
// store's Fence on PostgreSQL, through the leafctl binary on MariaDB); then
// it serves by itself. No ID of the drill is ever handed out twice.
func TestRestoreDrill(t *testing.T) {
	tests := []struct {
		kind  string
		stop  syscall.Signal // how the server goes down for the restart
		fence string         // "store" or "leafctl"
	}{
		{kind: "postgres", stop: syscall.SIGKILL, fence: "store"},
		{kind: "mysql", stop: syscall.SIGTERM, fence: "leafctl"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			const tag = "drill"
			ctx := t.Context()
			dir := t.TempDir()
			dsnStr := testDSN(t, tt.kind, dir)
			st := openStore(t, dsnStr)
			db := rawDB(t, tt.kind, dsnStr)
			if _, err := db.ExecContext(ctx, "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('drill', 1, 50, 'restore drill')"); err != nil {
				t.Fatal(err)
			}
			dataDir := filepath.Join(dir, "data")
			args := []string{"--segment-dsn", dsnStr, "--data-dir", dataDir, "--snowflake=false"}

			seen := map[int64]bool{}
			take := func(p *proc, n int) {
				t.Helper()
				for range n {
					id := p.id(t, tag)
					if seen[id] {
						t.Fatalf("ID %d handed out twice", id)
					}
					seen[id] = true
				}
			}

			p := startServer(t, dir, args...)
			take(p, 120)
			dump := dumpRow(t, db, tag) // the backup
			take(p, 300)
			restoreRow(t, tt.kind, db, dump)
			if err := p.Signal(tt.stop); err != nil {
				t.Fatal(err)
			}
			<-p.Done()

			marks, err := segment.ReadMarksLog(filepath.Join(dataDir, "segment-marks.log"))
			if err != nil {
				t.Fatal(err)
			}
			mark := marks[tag]
			for id := range seen {
				if id >= mark {
					t.Fatalf("ID %d handed out at or above the persisted mark %d", id, mark)
				}
			}

			p2 := startServer(t, dir, args...)
			status, body, err := p2.get(ctx, "/api/segment/get/"+tag)
			if err != nil || status != 500 || !strings.Contains(body, "Result{id=-3, status=EXCEPTION}") {
				t.Fatalf("GET after the restore = %d %s, %v; want 500 with id=-3", status, body, err)
			}
			logWant := []string{"level=ERROR", "refusing tag", "biz_tag=" + tag, "high_water=" + strconv.FormatInt(mark, 10),
				fmt.Sprintf("max_id is below the high-water mark: max_id %d, mark %d", dump.maxID, mark)} // refused by the UPDATE: nothing burned
			restoreWait(t, 10*time.Second, "the refusal log line", func() bool {
				for _, w := range logWant {
					if !strings.Contains(p2.logs(), w) {
						return false
					}
				}
				return true
			})
			if code, body, _ := p2.get(t.Context(), "/api/v1/segment/buffers"); code != 200 || !strings.Contains(body, `"refusing":true`) {
				t.Errorf("/api/v1/segment/buffers while refusing = %d %s, want refusing true", code, body)
			}
			if got := restoreMetric(t, p2, `leaf_segment_rewound{biz_tag="drill"}`); got != "1" {
				t.Fatalf("leaf_segment_rewound = %q while refusing, want 1", got)
			}
			// It keeps refusing, and its retries burn nothing: wait for
			// two more refused loads (each an allocation its UPDATE
			// refuses), not for a fixed time.
			burned := maxID(t, st, tag)
			refused := loadFailures(t, p2, tag)
			restoreWait(t, 20*time.Second, "two more refused loads", func() bool {
				if status, body, _ := p2.get(ctx, "/api/segment/get/"+tag); status != 500 || !strings.Contains(body, "id=-3") {
					t.Fatalf("GET while refusing = %d %s, want 500 with id=-3", status, body)
				}
				return loadFailures(t, p2, tag) >= refused+2
			})
			if got := maxID(t, st, tag); got != burned || got >= mark {
				t.Fatalf("max_id while refusing = %d (after the refusal %d), want it unchanged below the mark %d", got, burned, mark)
			}

			fenceTo(t, tt.fence, dsnStr, st, tag, mark)
			var first int64
			restoreWait(t, 40*time.Second, "serving after the fence", func() bool {
				status, body, err := p2.get(ctx, "/api/segment/get/"+tag)
				if err != nil || status != 200 {
					return false
				}
				first, err = strconv.ParseInt(body, 10, 64)
				return err == nil
			})
			if first != mark || seen[first] {
				t.Fatalf("first ID after the fence = %d, want the mark %d (seen before: %v)", first, mark, seen[first])
			}
			seen[first] = true
			take(p2, 300)
			for id := range seen {
				if id <= 0 {
					t.Fatalf("ID %d is not positive", id)
				}
			}
			if got := restoreMetric(t, p2, `leaf_segment_rewound{biz_tag="drill"}`); got != "0" {
				t.Fatalf("leaf_segment_rewound = %q after the fence, want 0", got)
			}
			if !strings.Contains(p2.logs(), "tag serves again") {
				t.Errorf("log does not say the tag serves again:\n%s", p2.logs())
			}
			t.Logf("%d distinct IDs; mark %d; restored max_id %d", len(seen), mark, dump.maxID)
		})
	}
}

// row is the dumped leaf_alloc row.
type row struct {
	tag         string
	maxID, step int64
	description sql.NullString
}

// dumpRow is the logical backup: SELECT the row into memory.
func dumpRow(t *testing.T, db *sql.DB, tag string) row {
	t.Helper()
	r := row{tag: tag}
	err := db.QueryRowContext(t.Context(), "SELECT max_id, step, description FROM leaf_alloc WHERE biz_tag = '"+tag+"'").
		Scan(&r.maxID, &r.step, &r.description)
	if err != nil {
		t.Fatalf("dump %q: %v", tag, err)
	}
	return r
}

// restoreRow puts the dumped row back as a restore does: delete, re-insert.
func restoreRow(t *testing.T, kind string, db *sql.DB, r row) {
	t.Helper()
	ins := "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ($1, $2, $3, $4)"
	del := "DELETE FROM leaf_alloc WHERE biz_tag = $1"
	if kind == "mysql" {
		ins = "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)"
		del = "DELETE FROM leaf_alloc WHERE biz_tag = ?"
	}
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(), del, r.tag); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, err := tx.ExecContext(t.Context(), ins, r.tag, r.maxID, r.step, r.description); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("restore: %v", err)
	}
}

// fenceTo raises max_id of tag to at least mark, as the operator does: with
// the store's Fence, or by running `leafctl tag fence` (falling back to
// Fence, with a log line, when cmd/leafctl does not build).
func fenceTo(t *testing.T, how, dsnStr string, st store.Store, tag string, mark int64) {
	t.Helper()
	if how == "leafctl" {
		if bin := leafctlBin(); bin != "" {
			out, err := exec.Command(bin, "tag", "fence", tag, "--min", strconv.FormatInt(mark, 10), "--dsn", dsnStr).CombinedOutput()
			if err != nil {
				t.Fatalf("leafctl tag fence: %v\n%s", err, out)
			}
			t.Logf("leafctl tag fence: %s", out)
			if got := maxID(t, st, tag); got < mark {
				t.Fatalf("max_id after leafctl tag fence --min %d = %d", mark, got)
			}
			return
		}
		t.Log("cmd/leafctl does not build; fencing through the store")
	}
	r, err := st.Fence(t.Context(), tag, mark)
	if err != nil || r.MaxID < mark {
		t.Fatalf("Fence(%q, %d) = %+v, %v", tag, mark, r, err)
	}
}

// restoreWait polls cond every 100 ms until it holds or limit passes.
func restoreWait(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// loadFailures is the failed (or refused) loads of tag that
// /api/v1/segment/buffers counts.
func loadFailures(t *testing.T, p *proc, tag string) int64 {
	t.Helper()
	code, body, err := p.get(t.Context(), "/api/v1/segment/buffers?prefix="+tag)
	if err != nil || code != 200 {
		t.Fatalf("GET /api/v1/segment/buffers = %d %s, %v", code, body, err)
	}
	var s struct {
		Buffers []struct {
			BizTag       string `json:"bizTag"`
			LoadFailures string `json:"loadFailures"`
		} `json:"buffers"`
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("buffers %s: %v", body, err)
	}
	for _, b := range s.Buffers {
		if b.BizTag == tag {
			n, err := strconv.ParseInt(b.LoadFailures, 10, 64)
			if err != nil {
				t.Fatalf("loadFailures of %s = %q: %v", tag, b.LoadFailures, err)
			}
			return n
		}
	}
	t.Fatalf("no buffer of %s in %s", tag, body)
	return 0
}

// restoreMetric returns the value of the /metrics sample whose name and
// labels are series, or "" when there is none.
func restoreMetric(t *testing.T, p *proc, series string) string {
	t.Helper()
	status, body, err := p.get(t.Context(), "/metrics")
	if err != nil || status != 200 {
		t.Fatalf("GET /metrics = %d, %v", status, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
