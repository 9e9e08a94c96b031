package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLayoutEndingWithinAYearRefused runs leaf-server with a layout that
// ends in about 40 days (32 time bits, 49.7 days, from an epoch 10 days
// ago): it must exit non-zero before listening, with a message naming the
// flags, the end date and the one-year rule (issue 22 item 3).
func TestLayoutEndingWithinAYearRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the leaf-server binary")
	}
	epoch := time.Now().Add(-10 * 24 * time.Hour).UnixMilli()
	end := time.UnixMilli(epoch + 1<<32).UTC().Format("2006-01-02")
	cmd := exec.Command(serverBin, "--listen", "127.0.0.1:0", "--segment=false",
		"--epoch-ms", strconv.FormatInt(epoch, 10), "--time-bits", "32", "--worker-bits", "10", "--sequence-bits", "12")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("leaf-server with a layout ending on %s started:\n%s", end, out)
	}
	for _, want := range []string{"--epoch-ms/--time-bits", "layout ends at " + end, "at least a year"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "listening") {
		t.Errorf("refused layout still listened:\n%s", out)
	}
}

// TestLayout53StartLog: a 53-bit layout starts, and the start log gives its
// end date and capacity (issue 22 item 3).
func TestLayout53StartLog(t *testing.T) {
	p := startServer(t, t.TempDir(), "--segment=false", "--time-bits", "41", "--worker-bits", "4", "--sequence-bits", "8")
	for _, want := range []string{"layout_end=2080-07-10", "id_bits=53", "max_id=9007199254740991", "ids_per_ms_per_worker=256", "workers=16"} {
		if !strings.Contains(p.logs(), want) {
			t.Errorf("start log lacks %q:\n%s", want, p.logs())
		}
	}
}
