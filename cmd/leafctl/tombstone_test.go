package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestTagCreateBelowTombstone: leafctl tag delete leaves the tag's last
// max_id in the database; tag create below it is refused on every dialect
// (before: created, and the IDs below it handed out again), at it succeeds,
// and --force --reason goes below it with an audit line on stderr.
func TestTagCreateBelowTombstone(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.dsn(t)
			must(t, "migrate", "up", "--dsn", d)
			must(t, "tag", "create", "tc", "--step", "100", "--dsn", d)
			st, err := dsn.Open(context.Background(), d, false)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for range 2 {
				if _, err := st.Allocate(context.Background(), "tc", 0, 0); err != nil {
					t.Fatal(err)
				}
			}
			must(t, "tag", "delete", "tc", "--yes", "--dsn", d)
			out := leafctl(t, opts{}, "tag", "create", "tc", "--step", "100", "--dsn", d)
			if !errors.Is(out.err, store.ErrBelowTombstone) || out.code != exitFailure ||
				!strings.Contains(out.err.Error(), "max_id 201") || !strings.Contains(out.err.Error(), "--force --reason") ||
				strings.Contains(out.err.Error(), "migrate up") {
				t.Fatalf("create below the tombstone = exit %d, %v; want exit 1, %v naming max_id 201 and --force --reason", out.code, out.err, store.ErrBelowTombstone)
			}
			out = leafctl(t, opts{}, "tag", "create", "tc", "--step", "100", "--force", "--dsn", d)
			if out.code != exitUsage {
				t.Errorf("--force without --reason = exit %d, %v; want a usage error", out.code, out.err)
			}
			forced := must(t, "tag", "create", "tc", "--step", "100", "--force", "--reason", "old tc never used", "--dsn", d)
			if !strings.Contains(forced.stderr, "audit: forced below the tombstone") || !strings.Contains(forced.stderr, "tombstone=201") ||
				!strings.Contains(forced.stderr, `reason="old tc never used"`) || !strings.Contains(forced.stderr, "user=tester") {
				t.Errorf("forced create stderr:\n%s\nwant an audit line with tombstone=201, the reason and the user", forced.stderr)
			}
			// The forced create kept the tombstone (no server may give a tail of
			// the old row back into the new one): deleted again at max_id 1, the
			// tag is still refused below 201, and created at it.
			must(t, "tag", "delete", "tc", "--yes", "--dsn", d)
			if out := leafctl(t, opts{}, "tag", "create", "tc", "--step", "100", "--dsn", d); !errors.Is(out.err, store.ErrBelowTombstone) {
				t.Errorf("create after a forced create and a delete = %v, want %v", out.err, store.ErrBelowTombstone)
			}
			must(t, "tag", "create", "tc", "--step", "100", "--max-id", "201", "--dsn", d)
		})
	}
}
