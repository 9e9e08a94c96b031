package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
)

// TestRecreatedTagThroughTwoServers is issue 20 item 6 on real processes:
// two servers on one PostgreSQL database, each with its own data dir. A
// tag is created and used through A, deleted through A, then created again
// at max_id 1 through B, which never saw it. Before: 201, and B handed out
// A's IDs again (16,000 duplicates in the run). Now B answers 409
// below_tombstone naming A's last max_id; created at that max_id, B's IDs
// all lie above A's: 0 duplicates.
func TestRecreatedTagThroughTwoServers(t *testing.T) {
	servertest.SkipShort(t)
	d := dbtest.Postgres(t)
	args := []string{"--snowflake=false", "--admin-token", "secret", "--segment-dsn", d}
	a := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args})
	b := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args})
	call := func(p *servertest.Proc, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, p.URL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := servertest.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	ids := func(p *servertest.Proc, n int) []int64 {
		t.Helper()
		var out []int64
		for len(out) < n {
			code, body := call(p, "GET", "/api/v1/segment/rt?count=1000", "")
			var got struct{ IDs []string }
			if code != 200 || json.Unmarshal([]byte(body), &got) != nil {
				t.Fatalf("batch of rt = %d %s", code, body)
			}
			for _, s := range got.IDs {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
		}
		return out
	}

	if code, body := call(a, "POST", "/api/v1/admin/tags", `{"bizTag":"rt","step":1000}`); code != 201 {
		t.Fatalf("create rt through A = %d %s", code, body)
	}
	fromA := ids(a, 4000)
	if code, body := call(a, "DELETE", "/api/v1/admin/tags/rt", ""); code != 204 {
		t.Fatalf("delete rt through A = %d %s", code, body)
	}
	code, body := call(b, "POST", "/api/v1/admin/tags", `{"bizTag":"rt","maxId":"1","step":1000}`)
	var refusal struct{ Code, Message string }
	_ = json.Unmarshal([]byte(body), &refusal)
	if code != http.StatusConflict || refusal.Code != "below_tombstone" {
		t.Fatalf("create rt at max_id 1 through B = %d %s, want 409 below_tombstone", code, body)
	}
	i := strings.Index(refusal.Message, "deleted at max_id ")
	if i < 0 {
		t.Fatalf("refusal %q names no max_id", refusal.Message)
	}
	tomb := strings.Fields(refusal.Message[i+len("deleted at max_id "):])[0]
	if code, body := call(b, "POST", "/api/v1/admin/tags", `{"bizTag":"rt","maxId":"`+tomb+`","step":1000}`); code != 201 {
		t.Fatalf("create rt at the tombstone %s through B = %d %s", tomb, code, body)
	}
	fromB := ids(b, 4000)
	seen := make(map[int64]bool, len(fromA))
	for _, v := range fromA {
		seen[v] = true
	}
	dups := 0
	for _, v := range fromB {
		if seen[v] {
			dups++
		}
	}
	if dups != 0 {
		t.Errorf("%d of B's %d IDs were handed out by A before the delete, want 0", dups, len(fromB))
	}
}
