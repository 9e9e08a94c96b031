package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake"
)

// TestCheckLayout: the first start records the layout; the same layout
// passes; a later epoch (new IDs below old ones) and narrower fields are
// refused without touching the record; an earlier epoch (new IDs above
// every old one) passes and is recorded; a damaged record is an error.
func TestCheckLayout(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	base := snowflake.DefaultLayout()
	if err := checkLayout(dir, base, time.Time{}, now); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, layoutFile)); err != nil {
		t.Fatalf("no record after the first start: %v", err)
	}
	if err := checkLayout(dir, base, now.Add(3*time.Second), now); err != nil {
		t.Errorf("same layout: %v", err)
	}

	later := base
	later.Epoch = base.Epoch.Add(2 * time.Second)
	if err := checkLayout(dir, later, now.Add(3*time.Second), now); err == nil || !strings.Contains(err.Error(), "would repeat IDs") {
		t.Errorf("epoch 2 s later = %v, want a refusal", err)
	}
	narrow := base
	narrow.WorkerBits, narrow.SequenceBits = 5, 17
	if err := checkLayout(dir, narrow, now.Add(3*time.Second), now); err == nil {
		t.Errorf("worker bits 10 → 5 = nil, want a refusal")
	}
	// A refusal leaves the record: the later epoch is still refused.
	if err := checkLayout(dir, later, time.Time{}, now); err == nil {
		t.Errorf("epoch 2 s later, second try = nil, want a refusal")
	}
	// The floor counts: a mark an hour ahead covers IDs up to that hour.
	earlierBit := base
	earlierBit.Epoch = base.Epoch.Add(-time.Minute)
	if err := checkLayout(dir, earlierBit, now.Add(time.Hour), now); err == nil {
		t.Errorf("epoch 1 min earlier with a mark 1 h ahead = nil, want a refusal (old IDs up to the mark)")
	}

	earlier := base
	earlier.Epoch = base.Epoch.Add(-24 * time.Hour)
	if err := checkLayout(dir, earlier, now.Add(3*time.Second), now); err != nil {
		t.Errorf("epoch a day earlier: %v, want accepted (every new ID above the old ones)", err)
	}
	if err := checkLayout(dir, base, now.Add(3*time.Second), now); err == nil {
		t.Errorf("back to the original epoch after moving it a day earlier = nil, want a refusal")
	}

	if err := os.WriteFile(filepath.Join(dir, layoutFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkLayout(dir, earlier, time.Time{}, now); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged record = %v, want an error saying so", err)
	}
}

// TestCheckLayoutBadWidths: a record that parses but holds widths no layout
// can have is refused as an error naming the record, not a panic on a
// negative shift.
func TestCheckLayoutBadWidths(t *testing.T) {
	dir := t.TempDir()
	rec := `{"epoch_ms":1288834974657,"time_bits":-1,"worker_bits":10,"sequence_bits":12}`
	if err := os.WriteFile(filepath.Join(dir, layoutFile), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	err := checkLayout(dir, snowflake.DefaultLayout(), time.Time{}, time.Now())
	if !errors.Is(err, snowflake.ErrInvalidLayout) || !strings.Contains(err.Error(), layoutFile) {
		t.Errorf("checkLayout with time_bits -1 in the record = %v, want %v naming %s", err, snowflake.ErrInvalidLayout, layoutFile)
	}
}

// TestEpochChangeRefused: on the real binary, for every worker ID source. A
// server issues snowflake IDs; restarted on the same data dir with the epoch
// 2 s later it would issue them again (the time mark is wall-clock ms), so
// it must refuse to start; with the old epoch it serves above its old IDs.
// The ZooKeeper and SQL sources keep no other file in the data dir, so the
// layout record must be written for them too.
func TestEpochChangeRefused(t *testing.T) {
	t.Parallel()
	sources := map[string]func(t *testing.T) []string{
		"static": func(*testing.T) []string { return []string{"--worker-id-source", "static", "--worker-id", "3"} },
		"zookeeper": func(t *testing.T) []string {
			addr := zktest.Addr(t)
			return []string{"--worker-id-source", "zookeeper", "--zk", addr, "--leaf-name", zktest.Name(t, addr), "--snowflake-port", "7001"}
		},
		"sql": func(t *testing.T) []string {
			return []string{"--worker-id-source", "sql", "--segment-dsn", dbtest.Postgres(t)}
		},
	}
	for name, source := range sources {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testEpochChangeRefused(t, append([]string{"--segment=false", "--snowflake"}, source(t)...))
		})
	}
}

func testEpochChangeRefused(t *testing.T, args []string) {
	dir := t.TempDir()
	a := startServer(t, dir, args...)
	a.WaitReady(t, time.Minute) // sql: a fresh row has no history, held back TTL + margin
	var last int64
	for range 200 {
		code, body, err := a.get(t.Context(), "/api/snowflake/get/k")
		if err != nil || code != 200 {
			t.Fatalf("snowflake ID = %d %q, %v", code, body, err)
		}
		if last, err = strconv.ParseInt(body, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	a.kill9()

	epoch := snowflake.DefaultLayout().Epoch.Add(2 * time.Second).UnixMilli()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, append(args, "--listen", "127.0.0.1:0", "--epoch-ms", strconv.FormatInt(epoch, 10))...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("restart with the epoch 2 s later = %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "snowflake layout changed") {
		t.Errorf("restart with the epoch 2 s later said:\n%s\nwant it to name the layout change", out)
	}

	b := startServer(t, dir, args...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := b.get(t.Context(), "/api/snowflake/get/k")
		if err == nil && code == 200 {
			id, _ := strconv.ParseInt(body, 10, 64)
			if id <= last {
				t.Errorf("restart with the old epoch: ID %d, want above %d", id, last)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart with the old epoch: no ID within 10 s: %d %q %v", code, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyWhileBehindMark: a server restarted at once after issuing
// snowflake IDs finds its persisted mark (written up to 3 s ahead) in the
// future: /readyz answers 503 while the snowflake route refuses, and 200
// once the clock has passed the mark.
func TestReadyWhileBehindMark(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--segment=false", "--snowflake", "--worker-id-source", "static", "--worker-id", "4"}
	a := startServer(t, dir, args...)
	if code, body, err := a.get(t.Context(), "/api/snowflake/get/k"); err != nil || code != 200 {
		t.Fatalf("snowflake ID = %d %q, %v", code, body, err)
	}
	a.kill9()
	b := startServer(t, dir, args...)
	code, body, _ := b.get(t.Context(), "/readyz")
	sf, _, _ := b.get(t.Context(), "/api/snowflake/get/k")
	if sf != 200 && code != 503 {
		t.Errorf("right after the restart: snowflake route %d but /readyz %d %q, want 503 while IDs are refused", sf, code, body)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, _ := b.get(t.Context(), "/readyz")
		sf, _, _ := b.get(t.Context(), "/api/snowflake/get/k")
		if code == 200 && sf == 200 {
			break
		}
		if code == 200 && sf != 200 {
			t.Fatalf("/readyz 200 while the snowflake route answers %d", sf)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %d, snowflake %d 15 s after the restart, want both 200", code, sf)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
