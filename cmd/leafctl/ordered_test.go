package main

import (
	"encoding/json"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
)

// TestTagCreateOrdered: --ordered creates an ordered tag (docs/contract.md
// §12), which tag list --json shows; --ordered with --group is bad usage.
func TestTagCreateOrdered(t *testing.T) {
	d := dbtest.SQLite(t)
	must(t, "migrate", "up", "--dsn", d)
	got := must(t, "tag", "create", "ev", "--step", "100", "--ordered", "--dsn", d)
	if want := "created ordered tag ev: max_id 1, step 100; its first ID will be 1\n"; got.stdout != want {
		t.Errorf("tag create --ordered: stdout %q, want %q", got.stdout, want)
	}
	must(t, "tag", "create", "plain", "--step", "100", "--dsn", d)
	var rows []rowJSON
	if err := json.Unmarshal([]byte(must(t, "tag", "list", "--json", "--dsn", d).stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].BizTag != "ev" || !rows[0].Ordered || rows[1].Ordered {
		t.Errorf("tag list --json = %+v, want ev ordered and plain not", rows)
	}
	out := leafctl(t, opts{}, "tag", "create", "g", "--step", "100", "--ordered", "--group", "day",
		"--time-zone", "UTC", "--format", "G{yyyyMMdd}{seq:4}", "--dsn", d)
	if out.code != exitUsage {
		t.Errorf("tag create --ordered --group = exit %d (%v), want %d", out.code, out.err, exitUsage)
	}
}
