package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// groupServer serves a fresh database of dsnStr with grouped tags on a fake
// clock, admin token "tok".
func groupServer(t *testing.T, dsnStr string, clock *clocktest.Clock) *httptest.Server {
	srv, _ := groupServerStore(t, dsnStr, clock)
	return srv
}

// groupServerStore is groupServer that also returns its store.
func groupServerStore(t *testing.T, dsnStr string, clock *clocktest.Clock) (*httptest.Server, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := dsn.Open(ctx, dsnStr, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	groups, err := group.New(ctx, gen, st, group.Config{
		PeriodsPath: filepath.Join(t.TempDir(), "group-periods.json"), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { groups.Close() })
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st, Groups: groups, AdminToken: "tok",
		Now: clock.Now, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}))
	t.Cleanup(srv.Close)
	return srv, st
}

// TestGroupListReadsTheStore: GET /api/v1/admin/groups answered the
// declarations in memory, so with the database down (or never reached since
// the start) it said 200 and no groups. It reads leaf_group now, and a store
// that does not answer is the admin API's 503 like every other admin call.
func TestGroupListReadsTheStore(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC))
	srv, st := groupServerStore(t, dbtest.SQLite(t), clock)
	mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups", "tok",
		`{"bizTag":"order","group":"day","timeZone":"UTC","format":"ORD{yyyyMMdd}{seq:6}","step":100}`), 201, "declare order")
	if got := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/admin/groups", "tok", ""), 200, "list"); !strings.Contains(got.body, `"order"`) {
		t.Fatalf("list = %s, want order", got.body)
	}
	st.Close()
	if got := call(t, "GET", srv.URL+"/api/v1/admin/groups", "tok", ""); got.status != 503 {
		t.Fatalf("list with the store closed = %d %s, want 503", got.status, got.body)
	}
}

func mustStatus(t *testing.T, got answer, want int, what string) answer {
	t.Helper()
	if got.status != want {
		t.Fatalf("%s = %d %s, want %d", what, got.status, got.body, want)
	}
	return got
}

func TestGroupRoutes(t *testing.T) {
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", dbtest.SQLite}, {"postgres", dbtest.Postgres}, {"mysql", dbtest.MySQL}} {
		t.Run(db.name, func(t *testing.T) {
			clock := clocktest.New(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC))
			srv := groupServer(t, db.dsn(t), clock)
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups", "tok",
				`{"bizTag":"order","group":"day","timeZone":"UTC","format":"ORD{yyyyMMdd}{seq:6}","step":100}`), 201, "declare order")

			got := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/order/formatted?count=250", "", ""), 200, "formatted")
			var ans struct{ IDs []string }
			if err := json.Unmarshal([]byte(got.body), &ans); err != nil || len(ans.IDs) != 250 {
				t.Fatalf("formatted body %s: %v", got.body, err)
			}
			seen := map[string]bool{}
			for _, id := range ans.IDs {
				if seen[id] || !strings.HasPrefix(id, "ORD20261201") || len(id) != 17 {
					t.Fatalf("ID %q repeated or not ORD20261201 + 6 digits", id)
				}
				seen[id] = true
			}
			for _, id := range []string{ans.IDs[0], ans.IDs[249]} {
				p := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/order/parse/"+id, "", ""), 200, "parse "+id)
				var pa struct{ BizTag, Period, Row, Sequence, PeriodStart string }
				_ = json.Unmarshal([]byte(p.body), &pa)
				seq, _ := strconv.ParseInt(id[11:], 10, 64)
				if pa.BizTag != "order" || pa.Period != "20261201" || pa.Row != "order:20261201" ||
					pa.Sequence != strconv.FormatInt(seq, 10) || pa.PeriodStart != "2026-12-01T00:00:00Z" {
					t.Fatalf("parse %s = %s", id, p.body)
				}
			}
			mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/order/parse/ORD20261301000001", "", ""), 400, "parse month 13")
			mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/nope/formatted", "", ""), 404, "formatted of a plain tag")
			mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/order/formatted?count=0", "", ""), 400, "count 0")

			// Leaf's route: never the bare sequence.
			leaf := mustStatus(t, call(t, "GET", srv.URL+"/api/segment/get/order", "", ""), 400, "Leaf route on ORD…")
			if !strings.Contains(leaf.body, "/api/v1/segment/order/formatted") {
				t.Fatalf("Leaf route body %s does not name the formatted route", leaf.body)
			}
			mustStatus(t, call(t, "GET", srv.URL+"/api/segment/get/order:20261201", "", ""), 400, "Leaf route on a period row")
			mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/order:20261201?count=2", "", ""), 400, "batch route on a period row")
			mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/order?count=2", "", ""), 400, "batch route on a grouped tag")
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups", "tok",
				`{"bizTag":"num","group":"day","timeZone":"Asia/Shanghai","format":"{yyyyMMdd}{seq:6}","step":10}`), 201, "declare num")
			first := mustStatus(t, call(t, "GET", srv.URL+"/api/segment/get/num", "", ""), 200, "Leaf route on a numeric template")
			if first.body != "20261201000001" { // 09:30 UTC is 17:30 in Shanghai
				t.Fatalf("Leaf route = %s, want 20261201000001", first.body)
			}
			clock.Set(time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)) // 00:00 on the 2nd in Shanghai
			if next := call(t, "GET", srv.URL+"/api/segment/get/num", "", "").body; next != "20261202000001" {
				t.Fatalf("Leaf route after Shanghai midnight = %s, want 20261202000001", next)
			}

			// Names that collide with periods are refused.
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/tags", "tok", `{"bizTag":"order:20261203","step":10}`), 409, "plain tag named like a period")
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/tags", "tok", `{"bizTag":"order","step":10}`), 409, "plain tag named like a grouped tag")
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/tags", "tok", `{"bizTag":"plain","step":10}`), 201, "plain tag")
			mustStatus(t, call(t, "DELETE", srv.URL+"/api/v1/admin/tags/order:20261201", "tok", ""), 409, "delete a period row")
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups", "tok",
				`{"bizTag":"plain","group":"day","timeZone":"UTC","format":"{yyyyMMdd}{seq:6}","step":10}`), 400, "group over a plain row")
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups", "tok",
				`{"bizTag":"x","group":"week","timeZone":"UTC","format":"{yyyyMMdd}{seq:6}","step":10}`), 400, "group week")
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups", "tok",
				`{"bizTag":"x","group":"day","timeZone":"Mars/Olympus","format":"{yyyyMMdd}{seq:6}","step":10}`), 400, "unknown zone")

			// Update: zone and step yes, format no.
			mustStatus(t, call(t, "PATCH", srv.URL+"/api/v1/admin/groups/order", "tok", `{"format":"ORD{yyyyMMdd}1{seq:5}"}`), 400, "format change")
			up := mustStatus(t, call(t, "PATCH", srv.URL+"/api/v1/admin/groups/order", "tok", `{"timeZone":"Europe/Berlin","retention":2}`), 200, "zone change")
			if !strings.Contains(up.body, `"timeZone":"Europe/Berlin"`) || !strings.Contains(up.body, `"retention":2`) {
				t.Fatalf("update answer %s", up.body)
			}

			// Periods and prune: the 2nd in Berlin, so the 1st is prunable,
			// the 2nd (current) is not.
			clock.Set(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
			mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/order/formatted", "", ""), 200, "formatted on the 2nd")
			ps := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/admin/groups/order/periods", "tok", ""), 200, "periods")
			if !strings.Contains(ps.body, `"period":"20261201"`) || !strings.Contains(ps.body, `"capacity":"999999"`) {
				t.Fatalf("periods = %s", ps.body)
			}
			mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups/order/prune", "tok", `{"before":"20261203"}`), 400, "prune the current period")
			pr := mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups/order/prune", "tok", `{"before":"20261202"}`), 200, "prune")
			if !strings.Contains(pr.body, `"deleted":["order:20261201"]`) {
				t.Fatalf("prune = %s", pr.body)
			}
			// A clock behind the prune is refused, never served again.
			clock.Set(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			list := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/admin/groups", "tok", ""), 200, "list")
			if !strings.Contains(list.body, `"prunedBefore":"20261202"`) {
				t.Fatalf("groups = %s", list.body)
			}
		})
	}
}

// TestGroupWidthRoute: the period's last ID of the width, then 409.
func TestGroupWidthRoute(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC))
	srv := groupServer(t, dbtest.SQLite(t), clock)
	mustStatus(t, call(t, "POST", srv.URL+"/api/v1/admin/groups", "tok",
		`{"bizTag":"t","group":"year","timeZone":"UTC","format":"{yyyy}{seq:2}","step":50}`), 201, "declare")
	got := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/t/formatted?count=99", "", ""), 200, "99 IDs")
	if !strings.Contains(got.body, `"202699"]`) {
		t.Fatalf("last ID of the width missing: %s", got.body)
	}
	over := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/segment/t/formatted", "", ""), 409, "past the width")
	if !strings.Contains(over.body, "width_exhausted") {
		t.Fatalf("overflow body %s", over.body)
	}
	leaf := mustStatus(t, call(t, "GET", srv.URL+"/api/segment/get/t", "", ""), 500, "Leaf route past the width")
	if !strings.Contains(leaf.body, "id=-3") {
		t.Fatalf("Leaf route past the width = %s", leaf.body)
	}
}

func TestSnowflakeTextRoute(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(api.Deps{}))
	t.Cleanup(srv.Close)
	id := "1947297034981384199" // any non-negative ID of the default layout
	got := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/snowflake/text/"+id, "", ""), 200, "text of an ID")
	var ans struct{ ID, Text string }
	if err := json.Unmarshal([]byte(got.body), &ans); err != nil || ans.ID != id || len(ans.Text) != 27 {
		t.Fatalf("text answer %s: %v", got.body, err)
	}
	back := mustStatus(t, call(t, "GET", srv.URL+"/api/v1/snowflake/text/"+ans.Text, "", ""), 200, "ID of a text")
	if !strings.Contains(back.body, `"id":"`+id+`"`) {
		t.Fatalf("ID of %s = %s, want %s", ans.Text, back.body, id)
	}
	mustStatus(t, call(t, "GET", srv.URL+"/api/v1/snowflake/text/2026-bad", "", ""), 400, "bad text")
	mustStatus(t, call(t, "GET", srv.URL+"/api/v1/snowflake/text/-5", "", ""), 400, "negative ID")
}

// TestGroupDeclaredOnAnotherServer: a grouped tag declared through server
// A's admin API is served by server B on its first request (B read
// leaf_group before the declaration and re-reads it every 60 s): formatted,
// numeric on Leaf's route, refused on the plain batch route as grouped,
// parsed, and pruned through B. A name leaf_group does not have is 404
// not_grouped saying so.
func TestGroupDeclaredOnAnotherServer(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC))
	d := dbtest.Postgres(t)
	a := groupServer(t, d, clock)
	b := groupServer(t, d, clock)
	if got := call(t, "GET", b.URL+"/api/v1/segment/order/formatted", "", ""); got.status != 404 ||
		!strings.Contains(got.body, `"not_grouped"`) || !strings.Contains(got.body, `leaf_group has no declaration of \"order\"`) {
		t.Fatalf("formatted of an undeclared tag = %d %s, want 404 not_grouped saying leaf_group has none", got.status, got.body)
	}
	for _, decl := range []string{
		`{"bizTag":"order","group":"day","timeZone":"UTC","format":"ORD{yyyyMMdd}{seq:6}","step":100}`,
		`{"bizTag":"num","group":"day","timeZone":"UTC","format":"{yyyyMMdd}{seq:6}","step":100}`,
		`{"bizTag":"plainroute","group":"year","timeZone":"UTC","format":"{yyyy}{seq:4}","step":10}`,
		`{"bizTag":"parsed","group":"month","timeZone":"UTC","format":"P{yyyyMM}{seq:4}","step":10}`,
		`{"bizTag":"pruned","group":"day","timeZone":"UTC","format":"{yyyyMMdd}{seq:4}","step":10}`,
	} {
		mustStatus(t, call(t, "POST", a.URL+"/api/v1/admin/groups", "tok", decl), 201, "declare on A")
	}
	clock.Add(time.Second) // past the second B remembers its miss of "order"
	if got := mustStatus(t, call(t, "GET", b.URL+"/api/v1/segment/order/formatted", "", ""), 200, "formatted on B"); !strings.Contains(got.body, `"ORD20261201000001"`) {
		t.Errorf("B's first formatted ID of order = %s, want ORD20261201000001", got.body)
	}
	if got := mustStatus(t, call(t, "GET", b.URL+"/api/segment/get/num", "", ""), 200, "Leaf route on B"); got.body != "20261201000001" {
		t.Errorf("B's Leaf route for num = %q, want 20261201000001", got.body)
	}
	if got := call(t, "GET", b.URL+"/api/v1/segment/plainroute?count=1", "", ""); got.status != 400 || !strings.Contains(got.body, `"use_formatted"`) {
		t.Errorf("B's plain batch route for a grouped tag = %d %s, want 400 use_formatted", got.status, got.body)
	}
	if got := mustStatus(t, call(t, "GET", b.URL+"/api/v1/segment/parsed/parse/P2026120007", "", ""), 200, "parse on B"); !strings.Contains(got.body, `"sequence":"7"`) {
		t.Errorf("B's parse = %s, want sequence 7", got.body)
	}
	if got := call(t, "POST", b.URL+"/api/v1/admin/groups/pruned/prune", "tok", `{"before":"20261101"}`); got.status != 200 {
		t.Errorf("prune through B = %d %s, want 200", got.status, got.body)
	}
}
