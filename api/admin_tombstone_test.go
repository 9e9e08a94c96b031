package api_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestAdminRefusesBelowTombstone is issue 20 item 6 through the handler: a
// tag deleted through one server and created again at max_id 1 through
// another, whose data dir never saw it (no high-water mark), was 201, and
// the second server handed out the first one's IDs again. The tombstone in
// the database refuses it with 409 below_tombstone naming the last max_id;
// "force" with a reason passes and the audit line names the tombstone.
func TestAdminRefusesBelowTombstone(t *testing.T) {
	const tok = "s3cr3t"
	ctx := context.Background()
	st, err := dsn.Open(ctx, dbtest.SQLite(t), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, _, _ := markServer(t, st, filepath.Join(t.TempDir(), "segment-marks.json"), tok)
	b, logsB, genB := markServer(t, st, filepath.Join(t.TempDir(), "segment-marks.json"), tok)

	if got := call(t, "POST", a.URL+"/api/v1/admin/tags", tok, `{"bizTag":"tb","step":1000}`); got.status != 201 {
		t.Fatalf("create tb on A = %d %s", got.status, got.body)
	}
	if got := call(t, "GET", a.URL+"/api/segment/get/tb", "", ""); got.status != 200 || got.body != "1" {
		t.Fatalf("GET tb on A = %d %s, want 200 1", got.status, got.body)
	}
	if got := call(t, "DELETE", a.URL+"/api/v1/admin/tags/tb", tok, ""); got.status != 204 {
		t.Fatalf("DELETE tb on A = %d %s", got.status, got.body)
	}
	if m := genB.HighWater("tb"); m != 0 {
		t.Fatalf("B's high-water mark for tb = %d, want 0 (B never saw it)", m)
	}
	for _, body := range []string{`{"bizTag":"tb","step":1000}`, `{"bizTag":"tb","maxId":"1000","step":1000}`} {
		got := call(t, "POST", b.URL+"/api/v1/admin/tags", tok, body)
		if got.status != 409 || !strings.Contains(got.body, `"code":"below_tombstone"`) || !strings.Contains(got.body, "max_id 1001") ||
			!strings.Contains(got.body, `\"force\": true`) {
			t.Errorf("create %s on B = %d %s, want 409 below_tombstone naming max_id 1001 and force", body, got.status, got.body)
		}
	}
	if rows, _ := st.Rows(ctx); len(rows) != 0 {
		t.Fatalf("refused creates wrote rows: %v", rows)
	}
	if got := call(t, "POST", b.URL+"/api/v1/admin/tags", tok, `{"bizTag":"tb","step":1000,"force":true}`); got.status != 400 {
		t.Errorf("force without a reason = %d %s, want 400", got.status, got.body)
	}
	got := call(t, "POST", b.URL+"/api/v1/admin/tags", tok, `{"bizTag":"tb","step":1000,"force":true,"reason":"IDs of the old tb were never stored"}`)
	if got.status != 201 {
		t.Fatalf("forced create on B = %d %s, want 201", got.status, got.body)
	}
	var audited, warned bool
	for _, l := range logsB.lines(t) {
		if l["msg"] == "admin audit" && l["op"] == "create" && l["forced"] == true && l["tombstone"] == float64(1001) &&
			l["reason"] == "IDs of the old tb were never stored" {
			audited = true
		}
		if l["msg"] == "admin: forced below the tombstone" && l["tombstone"] == float64(1001) {
			warned = true
		}
	}
	if !audited || !warned {
		t.Errorf("forced create: audit line %v, warn line %v; want both naming tombstone 1001; logs:\n%v", audited, warned, logsB.lines(t))
	}
}
