package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// backends are the real databases the tag commands run against; Postgres
// and MySQL skip outside CI when their server is not reachable.
var backends = []struct {
	name string
	dsn  func(testing.TB) string
}{
	{"sqlite", dbtest.SQLite},
	{"postgres", dbtest.Postgres},
	{"mariadb", dbtest.MySQL},
}

func TestTagRoundTrip(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.dsn(t)
			if b.name == "sqlite" {
				// A missing SQLite file is refused, not created.
				out := leafctl(t, opts{}, "migrate", "status", "--dsn", d)
				if out.code != exitFailure || !strings.Contains(out.err.Error(), "does not exist") {
					t.Fatalf("migrate status on a missing file = exit %d, %v; want exit 1, does not exist", out.code, out.err)
				}
			} else {
				out := must(t, "migrate", "status", "--dsn", d)
				if !strings.Contains(out.stdout, "00001_leaf_alloc.sql") || !strings.Contains(out.stdout, " no ") {
					t.Errorf("migrate status before up:\n%s\nwant 00001_leaf_alloc.sql not applied", out.stdout)
				}
			}
			up := must(t, "migrate", "up", "--dsn", d)
			// A fresh database: up says how many it applied, not "up to date".
			if n := strings.Count(up.stdout, " yes "); !strings.Contains(up.stdout, fmt.Sprintf(": applied %d migration", n)) ||
				strings.Contains(up.stdout, "up to date") {
				t.Errorf("migrate up on a fresh database:\n%s\nwant \"applied %d migration(s)\"", up.stdout, n)
			}
			if again := must(t, "migrate", "up", "--dsn", d); !strings.Contains(again.stdout, "is up to date: no migration to apply") {
				t.Errorf("second migrate up:\n%s\nwant \"is up to date\"", again.stdout)
			}
			status := must(t, "migrate", "status", "--dsn", d)
			for _, out := range []string{up.stdout, status.stdout} {
				if !strings.Contains(out, "VERSION") || !strings.Contains(out, "00001_leaf_alloc.sql") || strings.Contains(out, " no ") {
					t.Errorf("migrate status after up:\n%s\nwant every migration applied", out)
				}
			}

			got := must(t, "tag", "create", "order", "--step", "100", "--description", "orders of the shop", "--dsn", d)
			if want := "created tag order: max_id 1, step 100; its first ID will be 1\n"; got.stdout != want {
				t.Errorf("tag create order: stdout %q, want %q", got.stdout, want)
			}
			must(t, "tag", "create", "short_link", "--step", "5", "--max-id", "1000", "--dsn", d)

			list := must(t, "tag", "list", "--dsn", d).stdout
			wantRows := [][]string{
				{"TAG", "MAX_ID", "STEP", "DESCRIPTION", "UPDATE_TIME"},
				{"order", "1", "100", "orders of the shop"},
				{"short_link", "1000", "5", "-"},
			}
			checkTable(t, list, wantRows)

			var rows []rowJSON
			if err := json.Unmarshal([]byte(must(t, "tag", "list", "--json", "--dsn", d).stdout), &rows); err != nil {
				t.Fatalf("tag list --json: %v", err)
			}
			if len(rows) != 2 || rows[1].BizTag != "short_link" || rows[1].MaxID != 1000 || rows[1].Step != 5 || rows[0].Description != "orders of the shop" || rows[0].UpdateTime.IsZero() {
				t.Errorf("tag list --json = %+v, want order and short_link with their fields", rows)
			}

			must(t, "tag", "update", "order", "--step", "250", "--dsn", d)
			must(t, "tag", "update", "short_link", "--description", "links", "--dsn", d)
			must(t, "tag", "update", "order", "--description", "", "--dsn", d)
			checkTable(t, must(t, "tag", "list", "--dsn", d).stdout, [][]string{
				wantRows[0],
				{"order", "1", "250", "-"},
				{"short_link", "1000", "5", "links"},
			})

			// Fence raises max_id, prints before and after, and audits.
			fence := must(t, "tag", "fence", "short_link", "--min", "5000", "--dsn", d)
			if want := "fenced tag short_link: max_id 1000 -> 5000\n"; fence.stdout != want {
				t.Errorf("tag fence: stdout %q, want %q", fence.stdout, want)
			}
			for _, want := range []string{`time=2025-03-04T05:06:07.000Z`, `msg="audit: tag fence"`, "user=tester", "tag=short_link", "old_max_id=1000", "new_max_id=5000", "changed=true"} {
				if !strings.Contains(fence.stderr, want) {
					t.Errorf("tag fence: audit line %q lacks %q", fence.stderr, want)
				}
			}
			// ... and never lowers it.
			lower := must(t, "tag", "fence", "short_link", "--min", "10", "--dsn", d)
			if want := "tag short_link: max_id 5000 is already at least 10; unchanged\n"; lower.stdout != want {
				t.Errorf("tag fence --min 10: stdout %q, want %q", lower.stdout, want)
			}
			if !strings.Contains(lower.stderr, "new_max_id=5000") || !strings.Contains(lower.stderr, "changed=false") {
				t.Errorf("tag fence --min 10: audit line %q, want new_max_id=5000 changed=false", lower.stderr)
			}
			// The next segment a server gets starts at the fence.
			if a := allocate(t, d, "short_link"); a.Start() != 5000 {
				t.Errorf("segment after fence --min 5000 starts at %d, want 5000", a.Start())
			}

			// Delete: refused without --yes off a terminal, asked on one.
			out := leafctl(t, opts{}, "tag", "delete", "order", "--dsn", d)
			if out.code != exitUsage || !strings.Contains(out.err.Error(), "without --yes") {
				t.Errorf("tag delete without --yes off a terminal = exit %d, %v; want exit 2, without --yes", out.code, out.err)
			}
			out = leafctl(t, opts{interactive: true, stdin: "n\n"}, "tag", "delete", "order", "--dsn", d)
			if out.code != exitFailure || !errors.Is(out.err, errNotConfirmed) || !strings.Contains(out.stderr, "Delete tag order (max_id 1, step 250)?") {
				t.Errorf("tag delete answered n = exit %d, %v, prompt %q; want exit 1, not confirmed", out.code, out.err, out.stderr)
			}
			out = leafctl(t, opts{interactive: true, stdin: "y\n"}, "tag", "delete", "order", "--dsn", d)
			if out.err != nil || out.stdout != "deleted tag order (its max_id was 1)\n" {
				t.Errorf("tag delete answered y = %v, stdout %q; want deleted", out.err, out.stdout)
			}
			must(t, "tag", "delete", "short_link", "--yes", "--dsn", d)
			checkTable(t, must(t, "tag", "list", "--dsn", d).stdout, wantRows[:1])
		})
	}
}

func TestTagErrors(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.dsn(t)
			must(t, "migrate", "up", "--dsn", d)
			must(t, "tag", "create", "order", "--step", "100", "--dsn", d)
			tests := []struct {
				name     string
				give     []string
				wantCode int
				wantErr  error  // nil: only the message is checked
				wantMsg  string // in the error
			}{
				{"duplicate", []string{"tag", "create", "order", "--step", "5"}, exitFailure, store.ErrTagExists, `create "order"`},
				{"update unknown", []string{"tag", "update", "nope", "--step", "5"}, exitFailure, store.ErrTagNotFound, `tag "nope"`},
				{"delete unknown", []string{"tag", "delete", "nope", "--yes"}, exitFailure, store.ErrTagNotFound, `tag "nope"`},
				{"fence unknown", []string{"tag", "fence", "nope", "--min", "5"}, exitFailure, store.ErrTagNotFound, `tag "nope"`},
				{"create step 0", []string{"tag", "create", "a", "--step", "0"}, exitUsage, store.ErrBadStep, "0 is outside [1, 2147483647]"},
				{"create step -1", []string{"tag", "create", "a", "--step", "-1"}, exitUsage, store.ErrBadStep, "-1 is outside"},
				{"create step 2^31", []string{"tag", "create", "a", "--step", "2147483648"}, exitUsage, store.ErrBadStep, "2147483648 is outside"},
				{"create step abc", []string{"tag", "create", "a", "--step", "abc"}, exitUsage, nil, `invalid argument "abc"`},
				{"create max-id 0", []string{"tag", "create", "a", "--step", "5", "--max-id", "0"}, exitUsage, nil, "--max-id must be at least 1"},
				{"create tag not UTF-8", []string{"tag", "create", "a\xff", "--step", "5"}, exitUsage, nil, "UTF-8"},
				{"create description not UTF-8", []string{"tag", "create", "a", "--step", "5", "--description", "d\xc3"}, exitUsage, nil, "UTF-8"},
				{"update description not UTF-8", []string{"tag", "update", "order", "--description", "\xfe"}, exitUsage, nil, "UTF-8"},
				{"create long tag", []string{"tag", "create", strings.Repeat("x", 129), "--step", "5"}, exitUsage, nil, "1 to 128 characters"},
				{"update step 0", []string{"tag", "update", "order", "--step", "0"}, exitUsage, store.ErrBadStep, "0 is outside"},
				{"update nothing", []string{"tag", "update", "order"}, exitUsage, nil, "nothing to change"},
				{"fence min 0", []string{"tag", "fence", "order", "--min", "0"}, exitUsage, nil, "--min must be at least 1"},
				{"fence no min", []string{"tag", "fence", "order"}, exitUsage, nil, "required flag --min not set"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					out := leafctl(t, opts{}, append(tt.give, "--dsn", d)...)
					if out.code != tt.wantCode || out.err == nil || !strings.Contains(out.err.Error(), tt.wantMsg) ||
						tt.wantErr != nil && !errors.Is(out.err, tt.wantErr) {
						t.Errorf("leafctl %q = exit %d, %v; want exit %d, %v, %q", tt.give, out.code, out.err, tt.wantCode, tt.wantErr, tt.wantMsg)
					}
					if strings.Contains(out.err.Error(), "migrate up") {
						t.Errorf("leafctl %q: error %q hints at a missing table", tt.give, out.err)
					}
				})
			}
			// Nothing of the above changed the row.
			checkTable(t, must(t, "tag", "list", "--dsn", d).stdout, [][]string{
				{"TAG", "MAX_ID", "STEP", "DESCRIPTION", "UPDATE_TIME"},
				{"order", "1", "100", "-"},
			})
		})
	}
}

func TestTagUnmigrated(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.dsn(t)
			if b.name == "sqlite" {
				// An existing but empty file: the table is missing.
				path := strings.TrimPrefix(d, "sqlite:")
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out := leafctl(t, opts{}, "tag", "list", "--dsn", d)
			if out.code != exitFailure || !strings.Contains(out.err.Error(), "run: leafctl migrate up") {
				t.Errorf("tag list on an unmigrated database = exit %d, %v; want exit 1 with the migrate hint", out.code, out.err)
			}
		})
	}
}

func TestUnreachableDatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope", "leaf.db")
	tests := []struct {
		name string
		give string
		want string // in the error
	}{
		// Port 1 on loopback refuses connections at once.
		{"postgres", "postgres://leaf:s3cr3t-pw@127.0.0.1:1/leaf?sslmode=disable", "open postgres://leaf:xxxxx@127.0.0.1:1/leaf?sslmode=disable: "},
		{"postgres password param", "postgres://leaf@127.0.0.1:1/leaf?password=s3cr3t-pw", "password=xxxxx"},
		{"mysql", "mysql://leaf:s3cr3t-pw@tcp(127.0.0.1:1)/leaf", "open mysql://leaf:xxxxx@tcp(127.0.0.1:1)/leaf: "},
		{"sqlite missing file", "sqlite:" + missing, "sqlite database " + missing + " does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, args := range [][]string{{"tag", "list"}, {"tag", "create", "a", "--step", "5"}, {"migrate", "status"}} {
				out := leafctl(t, opts{}, append(args, "--dsn", tt.give, "--timeout", "5s")...)
				if out.code != exitFailure || out.err == nil || !strings.Contains(out.err.Error(), tt.want) {
					t.Errorf("leafctl %q --dsn %s = exit %d, %v; want exit 1 with %q", args, tt.name, out.code, out.err, tt.want)
					continue
				}
				if all := out.err.Error() + out.stdout + out.stderr; strings.Contains(all, "s3cr3t-pw") {
					t.Errorf("leafctl %q --dsn %s printed the password: %q", args, tt.name, all)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tag commands created %s (stat: %v); a missing SQLite file must not be created", filepath.Dir(missing), err)
	}
}

// allocate takes one segment of tag the way a server does.
func allocate(t *testing.T, d, tag string) store.Allocation {
	t.Helper()
	ctx := context.Background()
	st, err := dsn.Open(ctx, d, false)
	if err != nil {
		t.Fatalf("open %s: %v", dsn.Redact(d), err)
	}
	defer st.Close()
	a, err := st.Allocate(ctx, tag, 0, 0)
	if err != nil {
		t.Fatalf("Allocate(%q): %v", tag, err)
	}
	return a
}

// checkTable checks that the table has the rows of want, in order, each a
// prefix of the row's columns, and that the columns are aligned: every
// column of every line starts at the same offset as its heading.
func checkTable(t *testing.T, table string, want [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("table has %d lines, want %d:\n%s", len(lines), len(want), table)
	}
	var offsets []int // of each heading
	for i, c := range want[0] {
		off := strings.Index(lines[0], c)
		if off < 0 || i > 0 && off <= offsets[i-1] {
			t.Fatalf("table heading %q lacks %q in order:\n%s", lines[0], c, table)
		}
		offsets = append(offsets, off)
	}
	for i, row := range want[1:] {
		line := lines[i+1]
		for j, c := range row {
			if off := offsets[j]; off+len(c) > len(line) || line[off:off+len(c)] != c || off > 0 && line[off-1] != ' ' {
				t.Errorf("table line %d = %q, want %q at column %d (offset %d):\n%s", i+1, line, c, j, off, table)
			}
		}
	}
}
