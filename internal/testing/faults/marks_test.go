package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/segment"
)

// marksLog is the name of the high-water marks log in a data directory.
const marksLog = "segment-marks.log"

// tagSpace separates the IDs of the tags of the marks tests: tag i starts at
// (i+1)*tagSpace, so that IDs of different tags never collide and an ID
// names its tag.
const tagSpace = 1_000_000_000_000

// TestMarksLogKill: kill -9 at a random moment while 16 clients load 16
// tags (step 10, so that a mark is appended every few requests), restarted
// on the same data directory after every kill. Modes: "writes" (the log
// only grows; kill at a random moment) and "compaction" (--marks-compact-bytes
// 512: the log is rewritten as a snapshot every few dozen records, and the
// kill is aimed at the moment a compaction's temporary file shows; a
// temporary file left next to the log shows the kill landed inside one).
// After every kill the log must read (a torn tail is allowed, damage is
// not) and every ID served must lie below its tag's mark in the log: a
// segment is served only once its mark is durable. Every restart must
// start (the log is never left damaged) and no ID may repeat.
func TestMarksLogKill(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"writes", "compaction"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			marksKillRounds(t, mode, 6)
		})
	}
}

func marksKillRounds(t *testing.T, mode string, rounds int) {
	d := newDB(t, "postgres")
	const tags = 16
	for i := range tags {
		d.create(t, fmt.Sprintf("mk-%02d", i), int64(i+1)*tagSpace, 10)
	}
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	args := []string{"--segment-dsn", d.direct, "--migrate=false", "--snowflake=false", "--data-dir", dataDir}
	if mode == "compaction" {
		args = append(args, "--marks-compact-bytes", "512")
	}
	logPath := filepath.Join(dataDir, marksLog)
	all := newTally(time.Second+slack, 10*time.Second)
	inodes, leftovers, torn := 0, 0, 0
	for round := range rounds {
		p := start(t, dir, args...)
		tl := newTally(loadTimeout+slack, 10*time.Second)
		var killing atomic.Bool
		var targets []target
		for i := range tags {
			targets = append(targets, target{srv: func() *servertest.Proc { return p }, path: fmt.Sprintf("/api/segment/get/mk-%02d", i),
				tally: tl, connOK: killing.Load})
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { drive(ctx, targets) })
		wg.Go(func() { inodes += watchInode(ctx, logPath) })
		for deadline := time.Now().Add(10 * time.Second); tl.idCount() < 1 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(100+rand.IntN(700)) * time.Millisecond)
		if mode == "compaction" {
			// Aim at a compaction: kill as soon as its temporary file
			// shows (it lives from the snapshot's write to its rename).
			tmps := filepath.Join(dataDir, "."+marksLog+".tmp-*")
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
				if names, _ := filepath.Glob(tmps); len(names) > 0 {
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
		killing.Store(true)
		p.Kill9()
		<-p.Done()
		cancel()
		wg.Wait()

		if strings.Contains(p.Logs(), "torn tail") {
			torn++
		}
		names, _ := filepath.Glob(filepath.Join(dataDir, "."+marksLog+".tmp-*"))
		leftovers += len(names)
		marks, err := segment.ReadMarksLog(logPath)
		if err != nil {
			t.Fatalf("round %d: marks log after kill -9: %v", round, err)
		}
		ids, errs, worst, bad := tl.snapshot()
		for _, b := range bad {
			t.Errorf("round %d: %s", round, b)
		}
		if len(ids) == 0 {
			t.Errorf("round %d: no ID served before the kill", round)
		}
		above := 0
		for _, id := range ids {
			tag := fmt.Sprintf("mk-%02d", id/tagSpace-1)
			if id >= marks[tag] {
				if above < 5 {
					t.Errorf("round %d: ID %d of %s served, but the durable mark is %d", round, id, tag, marks[tag])
				}
				above++
			}
		}
		all.add(ids, errs, worst)
	}
	// The log must still load after the last kill.
	p := start(t, dir, args...)
	if status, body, err := p.Get(context.Background(), "/api/segment/get/mk-00"); err != nil || status != 200 {
		t.Errorf("GET after the last restart = %d %s, %v; want 200", status, body, err)
	}
	r := check(t, all, nil, "")
	r.Scenario = "3 process killed"
	r.Size = fmt.Sprintf("PostgreSQL, marks log, kill -9 during %s, %d kills, 16 tags, step 10", map[string]string{
		"writes": "mark writes", "compaction": "compactions (--marks-compact-bytes 512)"}[mode], rounds)
	r.Recovery = "restart"
	r.Cmd = "go test -race -count=1 -run '^TestMarksLogKill$/^" + mode + "$' ./faults/"
	r.Note = fmt.Sprintf("every ID below its tag's durable mark; %d log files replaced by compaction seen, %d compaction temp files left by kills, %d restarts cut a torn tail",
		inodes, leftovers, torn)
	if mode == "compaction" && inodes == 0 {
		t.Errorf("no compaction seen in %d rounds", rounds)
	}
	if mode == "compaction" && leftovers == 0 {
		t.Logf("no kill of %d landed inside a compaction (no temporary file left)", rounds)
	}
	report.add(t, r)
}

// watchInode polls path every millisecond until ctx ends and returns how
// often the file behind the name changed (a compaction renamed a snapshot
// over it).
func watchInode(ctx context.Context, path string) int {
	var last uint64
	changes := 0
	for ctx.Err() == nil {
		if st, err := os.Stat(path); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				if last != 0 && sys.Ino != last {
					changes++
				}
				last = sys.Ino
			}
		}
		time.Sleep(time.Millisecond)
	}
	return changes
}

// TestMarksLogDamage: a torn tail (a prefix of a record after the last whole
// one, as a crash inside a write leaves) is cut at the next start, which
// logs it and serves on, above every ID served before; a damaged record in
// the middle stops the start (exit 1, before listening) with what to do.
func TestMarksLogDamage(t *testing.T) {
	t.Parallel()
	d := newDB(t, "postgres")
	const tag = "mk-torn"
	d.create(t, tag, tagSpace, 10)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	args := []string{"--segment-dsn", d.direct, "--migrate=false", "--snowflake=false", "--data-dir", dataDir}
	logPath := filepath.Join(dataDir, marksLog)
	all := newTally(time.Second+slack, 10*time.Second)
	take := func(p *servertest.Proc, n int) {
		for range n {
			status, body, err := p.Get(context.Background(), "/api/segment/get/"+tag)
			if err != nil {
				t.Fatal(err)
			}
			all.record(false, status, body, 0, tag)
		}
	}

	p := start(t, dir, args...)
	take(p, 35)
	p.Kill9()
	<-p.Done()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	header := strings.Index(string(b), "\n") + 1
	torn := append(b, b[header:header+13]...) // a record cut after 13 of its bytes
	if err := os.WriteFile(logPath, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	p = start(t, dir, args...)
	take(p, 35)
	if !strings.Contains(p.Logs(), "torn tail of the high-water marks log cut") {
		t.Errorf("restart on a torn log logged no cut:\n%s", p.Logs())
	}
	if st, err := os.Stat(logPath); err != nil || st.Size() < int64(len(b)) {
		t.Errorf("log after the cut: %v, %v; want at least the %d whole bytes", st, err, len(b))
	}
	if m, err := segment.ReadMarksLog(logPath); err != nil || m[tag] <= tagSpace {
		t.Errorf("log after the cut reads %v, %v; want a mark of %s", m, err, tag)
	}
	p.Kill9()
	<-p.Done()

	// Damage in the middle: flip a bit of the first record's mark.
	b, err = os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	b[header+9] ^= 1
	if err := os.WriteFile(logPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LEAF_LOG_FORMAT=text")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "high-water marks log damaged") ||
		!strings.Contains(string(out), "move the file away") || strings.Contains(string(out), "msg=listening") {
		t.Errorf("start on a log damaged in the middle: %v\n%s\nwant exit status 1 before listening, naming the damage and what to do", err, out)
	}
	r := check(t, all, d, tag)
	r.Scenario = "3 process killed"
	r.Size = "PostgreSQL, marks log with a torn tail, then damaged in the middle"
	r.Recovery = "restart"
	r.Cmd = "go test -race -count=1 -run '^TestMarksLogDamage$' ./faults/"
	r.Note = "torn tail cut at the restart (logged), serving on; damage in the middle: exit 1 before listening, naming what to do"
	report.add(t, r)
}

// spillTags is how many tags TestFullDisk/marks loads once each to spend the
// slack of the marks log's last page (a record of a spill tag is 25 bytes).
const spillTags = 600

// spillMarks asks p for spill-000, spill-001, … once each, in turn, until
// ctx ends or all were asked, and returns how many answered 200.
func spillMarks(ctx context.Context, p *servertest.Proc, n int) int {
	ok := 0
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if status, _, err := p.Get(ctx, fmt.Sprintf("/api/segment/get/spill-%03d", i)); err == nil && status == 200 {
			ok++
		}
	}
	return ok
}
