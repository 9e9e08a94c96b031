package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestTagGroup: tag create --group, update, periods and prune on every
// backend; period rows are made here as a server makes them (Create).
func TestTagGroup(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.dsn(t)
			must(t, "migrate", "up", "--dsn", d)
			out := must(t, "tag", "create", "order", "--dsn", d, "--step", "1000", "--group", "day",
				"--time-zone", "Asia/Shanghai", "--format", "ORD{yyyyMMdd}{seq:6}", "--retention", "30")
			if !strings.Contains(out.stdout, "created grouped tag order: day in Asia/Shanghai") {
				t.Fatalf("create --group said %q", out.stdout)
			}
			for _, tt := range []struct {
				args []string
				want string
			}{
				{[]string{"tag", "create", "bad", "--step", "10", "--group", "week", "--format", "{yyyyMMdd}{seq:6}"}, "group must be day"},
				{[]string{"tag", "create", "bad", "--step", "10", "--group", "day"}, "--format is required"},
				{[]string{"tag", "create", "bad", "--step", "10", "--group", "day", "--format", "{yyyyMM}{seq:6}"}, "needs a day field"},
				{[]string{"tag", "create", "order:20261201", "--step", "10"}, "collides with a grouped tag"},
				{[]string{"tag", "update", "order", "--format", "X{yyyyMMdd}{seq:6}"}, "cannot change"},
				// Group-only flags without --group used to create a plain tag.
				{[]string{"tag", "create", "plain", "--step", "10", "--format", "ORD{yyyyMMdd}{seq:6}"}, "--format: only for grouped tags; add --group"},
				{[]string{"tag", "create", "plain", "--step", "10", "--time-zone", "Asia/Shanghai"}, "--time-zone: only for grouped tags"},
				{[]string{"tag", "create", "plain", "--step", "10", "--retention", "30", "--format", "{yyyy}{seq:4}"}, "--format, --retention: only for grouped tags"},
				{[]string{"tag", "create", "plain", "--step", "10", "--group", ""}, "--group wants day, month or year"},
			} {
				got := leafctl(t, opts{}, append(tt.args, "--dsn", d)...)
				if got.err == nil || !strings.Contains(got.err.Error(), tt.want) {
					t.Errorf("leafctl %v = %v, want an error with %q", tt.args, got.err, tt.want)
				}
			}
			if list := must(t, "tag", "list", "--dsn", d); strings.Contains(list.stdout, "plain") {
				t.Errorf("tag list after the refused creates:\n%s\nwant no tag plain", list.stdout)
			}
			up := must(t, "tag", "update", "order", "--dsn", d, "--time-zone", "UTC", "--step", "500")
			if !strings.Contains(up.stdout, "day in UTC") || !strings.Contains(up.stdout, "step 500") {
				t.Fatalf("update said %q", up.stdout)
			}
			// Periods as a server creates them.
			st, err := dsn.Open(context.Background(), d, false)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, p := range []string{"20261030", "20261031", "20261101"} {
				if err := st.Create(context.Background(), store.Row{BizTag: "order:" + p, MaxID: 1, Step: 500}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.Allocate(context.Background(), "order:20261101", 0, 0); err != nil {
				t.Fatal(err)
			}
			if got := leafctl(t, opts{}, "tag", "delete", "order:20261101", "--yes", "--dsn", d); got.err == nil ||
				!strings.Contains(got.err.Error(), "tag prune") {
				t.Fatalf("tag delete of a period row = %v, want refused (use prune)", got.err)
			}
			ps := must(t, "tag", "periods", "order", "--dsn", d)
			if !strings.Contains(ps.stdout, "20261101") || !strings.Contains(ps.stdout, "500") || !strings.Contains(ps.stdout, "999999") {
				t.Fatalf("periods:\n%s", ps.stdout)
			}
			tomorrow := time.Now().UTC().AddDate(0, 0, 2).Format("2006-01-02")
			if got := leafctl(t, opts{}, "tag", "prune", "order", "--dsn", d, "--before", tomorrow); got.err == nil {
				t.Fatalf("prune before %s (the future) = nil, want refused", tomorrow)
			}
			pr := must(t, "tag", "prune", "order", "--dsn", d, "--before", "2026-11-01")
			if !strings.Contains(pr.stdout, "2 rows deleted\n  order:20261030\n  order:20261031\n") {
				t.Fatalf("prune said %q", pr.stdout)
			}
			after := must(t, "tag", "periods", "order", "--dsn", d)
			if strings.Contains(after.stdout, "20261031") || !strings.Contains(after.stdout, "pruned before 20261101") {
				t.Fatalf("periods after prune:\n%s", after.stdout)
			}
		})
	}
}
