package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/buildinfo"
	"github.com/leaf-go/leaf/internal/dbtest"
)

// fixedNow is the clock of the audit log in tests.
var fixedNow = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// outcome is one in-process leafctl run.
type outcome struct {
	stdout, stderr string
	err            error
	code           int // exit code main would use
}

// opts are the parts of env a test sets.
type opts struct {
	stdin       string
	interactive bool
	vars        map[string]string // the environment
}

// leafctl runs one command line through the cobra root in-process, with
// captured output, a fixed audit clock and user "tester".
func leafctl(t *testing.T, o opts, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRoot(env{
		stdin:       strings.NewReader(o.stdin),
		stdout:      &stdout,
		stderr:      &stderr,
		getenv:      func(k string) string { return o.vars[k] },
		interactive: o.interactive,
		now:         func() time.Time { return fixedNow },
		user:        func() string { return "tester" },
	})
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return outcome{stdout: stdout.String(), stderr: stderr.String(), err: err, code: exitCode(err)}
}

// must runs leafctl and fails the test unless it succeeds.
func must(t *testing.T, args ...string) outcome {
	t.Helper()
	out := leafctl(t, opts{}, args...)
	if out.err != nil {
		t.Fatalf("leafctl %s: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out.err, out.code, out.stdout, out.stderr)
	}
	return out
}

func TestExitCodeUsage(t *testing.T) {
	dsn := dbtest.SQLite(t)
	tests := []struct {
		name string
		give []string
		want string // in the error
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown subcommand", []string{"tag", "lst"}, `unknown command "lst" for "leafctl tag"`},
		{"unknown flag", []string{"tag", "list", "--bogus"}, "unknown flag: --bogus"},
		{"missing tag", []string{"tag", "create", "--step", "5", "--dsn", dsn}, "takes one tag"},
		{"missing step", []string{"tag", "create", "a", "--dsn", dsn}, "required flag --step not set"},
		{"two tags", []string{"tag", "delete", "a", "b", "--dsn", dsn}, "takes one tag"},
		{"bad timeout", []string{"tag", "list", "--timeout", "-1s"}, "--timeout must be positive"},
		{"bad dsn scheme", []string{"tag", "list", "--dsn", "redis://x"}, "unsupported scheme"},
		{"migrate alone", []string{"migrate"}, "missing command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := leafctl(t, opts{}, tt.give...)
			if out.code != exitUsage || out.err == nil || !strings.Contains(out.err.Error(), tt.want) {
				t.Errorf("leafctl %q = exit %d, %v; want exit %d with %q", tt.give, out.code, out.err, exitUsage, tt.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		give error
		want int
	}{
		{nil, 0},
		{errors.New("boom"), exitFailure},
		{usagef("bad flag"), exitUsage},
		{errDuplicate, exitDuplicate},
	}
	for _, tt := range tests {
		if got := exitCode(tt.give); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

func TestEnvironmentDSN(t *testing.T) {
	fromEnv, fromFlag := dbtest.SQLite(t), dbtest.SQLite(t)
	must(t, "migrate", "up", "--dsn", fromEnv)
	must(t, "migrate", "up", "--dsn", fromFlag)
	vars := map[string]string{"LEAF_SEGMENT_DSN": fromEnv}
	if out := leafctl(t, opts{vars: vars}, "tag", "create", "env-tag", "--step", "10"); out.err != nil {
		t.Fatalf("tag create with LEAF_SEGMENT_DSN: %v", out.err)
	}
	if out := leafctl(t, opts{vars: vars}, "tag", "create", "flag-tag", "--step", "10", "--dsn", fromFlag); out.err != nil {
		t.Fatalf("tag create with --dsn: %v", out.err)
	}
	if got := must(t, "tag", "list", "--dsn", fromEnv).stdout; !strings.Contains(got, "env-tag") || strings.Contains(got, "flag-tag") {
		t.Errorf("LEAF_SEGMENT_DSN database lists:\n%s\nwant env-tag only (the flag wins over the environment)", got)
	}
	if got := must(t, "tag", "list", "--dsn", fromFlag).stdout; !strings.Contains(got, "flag-tag") {
		t.Errorf("--dsn database lists:\n%s\nwant flag-tag", got)
	}
}

// TestVersion checks that --version prints leafctl's build and exits 0
// without a database.
func TestVersion(t *testing.T) {
	out := must(t, "--version")
	want := "leafctl " + buildinfo.Read().String() + "\n"
	if out.stdout != want {
		t.Errorf("leafctl --version printed %q, want %q", out.stdout, want)
	}
}
