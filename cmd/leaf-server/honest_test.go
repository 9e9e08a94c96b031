package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the server's writes while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDamagedMarksSaysWhatToDo is issue 16 item 9: a damaged
// segment-marks.json stopped the start with the parse error alone. The
// refusal now says why the start stops and what to do: restore the file,
// or move it aside when the table has not gone back in time.
func TestDamagedMarksSaysWhatToDo(t *testing.T) {
	tests := []struct{ name, give string }{
		{"truncated", `{"marks":{"order":"40`},
		{"not a number", `{"marks":{"order":"forty"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "segment-marks.json")
			if err := os.WriteFile(path, []byte(tt.give), 0o644); err != nil {
				t.Fatal(err)
			}
			var out lockedBuffer
			err := run(t.Context(), []string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--snowflake=false"}, env(nil), &out, &out)
			if err == nil {
				t.Fatal("run() with a damaged marks file = nil, want the start refused")
			}
			for _, want := range []string{path, "damaged", "Restore it from a backup", "mv " + path + " " + path + ".damaged", "rebuilt from leaf_alloc"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("run() = %q, want it to say %q", err, want)
				}
			}
		})
	}
}

// TestEpochZeroWarns is issue 16 item 9: --epoch-ms 0 (41 time bits: the
// layout ends on 2039-09-07) was accepted with an INFO line. The start goes
// on (a deployment already on it cannot move its epoch without repeating
// IDs), with a WARN line naming the end and the fix. The default epoch
// logs no such line.
func TestEpochZeroWarns(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantWarn bool
	}{
		{"epoch 0", []string{"--epoch-ms", "0"}, true},
		{"default epoch", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out lockedBuffer
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			args := append([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--segment=false"}, tt.args...)
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, env(nil), &out, &out) }()
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(out.String(), "msg=listening") {
				select {
				case err := <-done:
					t.Fatalf("run(%q) = %v before listening; log:\n%s", args, err, out.String())
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("run(%q) did not listen within 20 s; log:\n%s", args, out.String())
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run(%q) = %v", args, err)
			}
			var warn string
			for line := range strings.Lines(out.String()) {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "runs out soon") {
					warn = line
				}
			}
			if !tt.wantWarn {
				if warn != "" {
					t.Errorf("default epoch logged %q", warn)
				}
				return
			}
			for _, want := range []string{"--epoch-ms 0 is the Unix epoch", "layout_end=2039-09-07", "years_left=", "1288834974657"} {
				if !strings.Contains(warn, want) {
					t.Errorf("warn line %q does not say %q; log:\n%s", warn, want, out.String())
				}
			}
		})
	}
}
