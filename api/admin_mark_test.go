package api_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// markServer is an admin server whose generator keeps its high-water marks
// in marksPath (as leaf-server's segment-marks.json), on st.
func markServer(t *testing.T, st store.Store, marksPath, token string) (*httptest.Server, *syncBuffer, *segment.Generator) {
	t.Helper()
	logs := &syncBuffer{}
	gen, err := segment.New(context.Background(), st, segment.Config{Marks: segment.NewFileMarks(marksPath)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st, AdminToken: token,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}))
	t.Cleanup(srv.Close)
	return srv, logs, gen
}

// TestAdminRefusesBelowHighWater is issue 16 item 8 over HTTP: DELETE then
// POST of a tag at max_id 1 while this server holds a mark for it was
// accepted, and the server (or one with a fresh data dir) then repeated IDs.
// A create or fence below the mark is 409 naming the mark, also after a
// restart on the same data dir; "force" with a reason passes and is logged.
func TestAdminRefusesBelowHighWater(t *testing.T) {
	const tok = "s3cr3t"
	ctx := context.Background()
	st, err := dsn.Open(ctx, dbtest.SQLite(t), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	marks := filepath.Join(t.TempDir(), "segment-marks.json")
	srv, logs, gen := markServer(t, st, marks, tok)
	do := func(method, path, body string) answer {
		t.Helper()
		return call(t, method, srv.URL+path, tok, body)
	}

	if got := do("POST", "/api/v1/admin/tags", `{"bizTag":"ta","step":1000}`); got.status != 201 {
		t.Fatalf("create ta = %d %s", got.status, got.body)
	}
	if got := call(t, "GET", srv.URL+"/api/segment/get/ta", "", ""); got.status != 200 || got.body != "1" {
		t.Fatalf("GET ta = %d %s, want 200 1", got.status, got.body)
	}
	const mark = 1001 // the first segment is [1, 1001)
	if got := gen.HighWater("ta"); got != mark {
		t.Fatalf("HighWater(ta) = %d, want %d", got, mark)
	}
	// The row is still there: a second create is tag_exists, not a mark to force past.
	if got := do("POST", "/api/v1/admin/tags", `{"bizTag":"ta","maxId":"1","step":1000}`); got.status != 409 ||
		!strings.Contains(got.body, `"code":"tag_exists"`) {
		t.Fatalf("create of the existing ta at maxId 1 = %d %s, want 409 tag_exists", got.status, got.body)
	}
	if got := do("DELETE", "/api/v1/admin/tags/ta", ""); got.status != 204 {
		t.Fatalf("DELETE ta = %d %s", got.status, got.body)
	}

	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantIn                   []string
	}{
		{"create at max_id 1", "POST", "/api/v1/admin/tags", `{"bizTag":"ta","maxId":"1","step":1000}`,
			409, []string{`"code":"below_high_water"`, "maxId 1 ", "high-water mark 1001", "Use maxId 1001 or more", `\"force\": true`}},
		{"create without maxId (1)", "POST", "/api/v1/admin/tags", `{"bizTag":"ta","step":1000}`,
			409, []string{`"code":"below_high_water"`, "1001"}},
		{"create one below", "POST", "/api/v1/admin/tags", `{"bizTag":"ta","maxId":1000,"step":1000}`,
			409, []string{"from 1000 to 1000"}},
		{"force without reason", "POST", "/api/v1/admin/tags", `{"bizTag":"ta","maxId":1,"step":1000,"force":true}`,
			400, []string{`"code":"bad_body"`, "reason"}},
		{"force with a blank reason", "POST", "/api/v1/admin/tags", `{"bizTag":"ta","maxId":1,"step":1000,"force":true,"reason":"  "}`,
			400, []string{`"code":"bad_body"`}},
		{"reason without force", "POST", "/api/v1/admin/tags", `{"bizTag":"ta","maxId":1,"step":1000,"reason":"x"}`,
			409, []string{"below_high_water"}},
	}
	for _, tt := range tests {
		got := do(tt.method, tt.path, tt.body)
		if got.status != tt.wantStatus {
			t.Errorf("%s: %s %s = %d %s, want %d", tt.name, tt.method, tt.path, got.status, got.body, tt.wantStatus)
		}
		for _, w := range tt.wantIn {
			if !strings.Contains(got.body, w) {
				t.Errorf("%s: body %s does not contain %q", tt.name, got.body, w)
			}
		}
	}
	if rows, _ := st.Rows(ctx); len(rows) != 0 {
		t.Fatalf("refused creates wrote rows: %v", rows)
	}

	// Forced: created, and the reason is in the audit line.
	if got := do("POST", "/api/v1/admin/tags", `{"bizTag":"ta","maxId":"1","step":1000,"force":true,"reason":"restored from test backup"}`); got.status != 201 {
		t.Fatalf("forced create = %d %s, want 201", got.status, got.body)
	}
	var audited bool
	for _, l := range logs.lines(t) {
		if l["msg"] == "admin audit" && l["op"] == "create" && l["forced"] == true &&
			l["reason"] == "restored from test backup" && l["high_water"] == float64(mark) {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no audit line with forced, reason and high_water for the forced create; logs:\n%v", logs.lines(t))
	}
	// A fence below the mark is refused; at the mark it passes.
	if got := do("POST", "/api/v1/admin/tags/ta/fence", `{"min":"500"}`); got.status != 409 || !strings.Contains(got.body, "min 500 ") || !strings.Contains(got.body, "1001") {
		t.Errorf("fence below the mark = %d %s, want 409 naming min and the mark", got.status, got.body)
	}
	if got := do("POST", "/api/v1/admin/tags/ta/fence", `{"min":"1001"}`); got.status != 200 || !strings.Contains(got.body, `"maxId":"1001"`) {
		t.Fatalf("fence at the mark = %d %s, want 200 with maxId 1001", got.status, got.body)
	}

	// The mark survives a restart on the same data dir and a deleted row.
	srv.Close()
	gen.Close()
	if err := st.Delete(ctx, "ta"); err != nil {
		t.Fatal(err)
	}
	srv2, _, gen2 := markServer(t, st, marks, tok)
	high := gen2.HighWater("ta")
	if high < mark {
		t.Fatalf("HighWater(ta) after restart = %d, want >= %d", high, mark)
	}
	got := call(t, "POST", srv2.URL+"/api/v1/admin/tags", tok, `{"bizTag":"ta","step":1000}`)
	if got.status != 409 || !strings.Contains(got.body, strconv.FormatInt(high, 10)) {
		t.Errorf("create after restart = %d %s, want 409 naming %d", got.status, got.body, high)
	}
	got = call(t, "POST", srv2.URL+"/api/v1/admin/tags", tok, `{"bizTag":"ta","step":1000,"maxId":"`+strconv.FormatInt(high, 10)+`"}`)
	if got.status != 201 {
		t.Errorf("create at the mark after restart = %d %s, want 201", got.status, got.body)
	}
}
