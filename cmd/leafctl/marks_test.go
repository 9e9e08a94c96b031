package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
)

// TestTagMarksGuard is issue 16 item 8 for leafctl: with a server's
// segment-marks.json given as --marks, tag create and tag fence refuse a
// max_id below the server's mark for the tag, naming it, unless --force
// --reason, which writes an audit line. Without --marks nothing changes.
func TestTagMarksGuard(t *testing.T) {
	d := dbtest.SQLite(t)
	must(t, "migrate", "up", "--dsn", d)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := os.WriteFile(a, []byte(`{"marks":{"ta":"624704","other":"9"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(`{"marks":{"ta":"1001"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantErr  error  // nil: succeeds
		wantIn   string // in the error, or in stderr on success
		wantCode int
	}{
		{"create at 1 below the highest mark", []string{"tag", "create", "ta", "--step", "10", "--marks", b, "--marks", a},
			errBelowMark, "--max-id 1 of tag ta is below the high-water mark 624704 in " + a, exitFailure},
		{"create just below", []string{"tag", "create", "ta", "--step", "10", "--max-id", "624703", "--marks", a},
			errBelowMark, "Use --max-id 624704 or more", exitFailure},
		{"force without a reason", []string{"tag", "create", "ta", "--step", "10", "--marks", a, "--force"},
			nil, "--force needs --reason", exitUsage},
		{"unreadable marks", []string{"tag", "create", "ta", "--step", "10", "--marks", filepath.Join(dir, "bad.json")},
			nil, "", exitFailure},
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"marks":`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		out := leafctl(t, opts{}, append(tt.args, "--dsn", d)...)
		if out.err == nil || out.code != tt.wantCode || (tt.wantErr != nil && !errors.Is(out.err, tt.wantErr)) || !strings.Contains(out.err.Error(), tt.wantIn) {
			t.Errorf("%s: leafctl %s = exit %d, %v; want exit %d with %q", tt.name, strings.Join(tt.args, " "), out.code, out.err, tt.wantCode, tt.wantIn)
		}
	}
	// The marks log a server of today writes (segment-marks.log) is read as well, and a
	// missing file is an error, never an empty set of marks.
	logPath := filepath.Join(dir, "segment-marks.log")
	lm := segment.NewLogMarks(logPath, "", slog.New(slog.DiscardHandler))
	if err := lm.StoreAll(context.Background(), map[string]int64{"ta": 700000}); err != nil {
		t.Fatal(err)
	}
	if err := lm.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, marks, wantIn string
		wantErr             error
	}{
		{"below the log's mark", logPath, "below the high-water mark 700000 in " + logPath, errBelowMark},
		{"missing marks file", filepath.Join(dir, "missing.log"), "no such file", nil},
	} {
		out := leafctl(t, opts{}, "tag", "create", "ta", "--step", "10", "--max-id", "624704", "--marks", tt.marks, "--dsn", d)
		if out.err == nil || out.code != exitFailure || (tt.wantErr != nil && !errors.Is(out.err, tt.wantErr)) || !strings.Contains(out.err.Error(), tt.wantIn) {
			t.Errorf("%s: exit %d, %v; want exit %d with %q", tt.name, out.code, out.err, exitFailure, tt.wantIn)
		}
	}
	if list := must(t, "tag", "list", "--dsn", d).stdout; strings.Contains(list, "ta ") {
		t.Fatalf("refused creates wrote a row:\n%s", list)
	}
	// At the mark, and forced below it with an audit line.
	must(t, "tag", "create", "ta", "--step", "10", "--max-id", "624704", "--marks", a, "--dsn", d)
	must(t, "tag", "create", "other", "--step", "10", "--dsn", d) // no --marks: no guard
	out := leafctl(t, opts{}, "tag", "fence", "other", "--min", "5", "--marks", a, "--dsn", d)
	if !errors.Is(out.err, errBelowMark) {
		t.Errorf("fence other --min 5 with mark 9 = %v, want errBelowMark", out.err)
	}
	out = must(t, "tag", "fence", "other", "--min", "5", "--marks", a, "--force", "--reason", "mark file from another cluster", "--dsn", d)
	for _, want := range []string{`msg="audit: forced below the high-water mark"`, "user=tester", "tag=other", "high_water=9", `reason="mark file from another cluster"`} {
		if !strings.Contains(out.stderr, want) {
			t.Errorf("forced fence: stderr %q does not contain %q", out.stderr, want)
		}
	}
}
