package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
)

// TestGroupedNamesRefusedByTheServer runs the real leaf-server (its routes get the store
// wrapped by boundStore) and checks that the admin API refuses what would restart a grouped
// tag's sequence: deleting the current period's row (the next request would create it again
// from 1, and a server with a fresh data dir would repeat the IDs) and creating plain tags
// named like the grouped tag or one of its period rows. The api package's own tests hand the
// handler a raw store; this one failed while the wrapper hid store.GroupStore.
func TestGroupedNamesRefusedByTheServer(t *testing.T) {
	servertest.SkipShort(t)
	p := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(),
		Args: []string{"--snowflake=false", "--admin-token", "secret"}})
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, p.URL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call("POST", "/api/v1/admin/groups",
		`{"bizTag":"order","group":"day","timeZone":"UTC","format":"ORD{yyyyMMdd}{seq:6}","step":10}`); code != 201 {
		t.Fatalf("declare the group: %d %s", code, body)
	}
	if code, body := call("GET", "/api/v1/segment/order/formatted?count=3", ""); code != 200 {
		t.Fatalf("formatted IDs: %d %s", code, body)
	}
	period := "order:" + time.Now().UTC().Format("20060102")
	tomorrow := "order:" + time.Now().UTC().Add(24*time.Hour).Format("20060102")
	for _, tt := range []struct{ method, path, body string }{
		{"DELETE", "/api/v1/admin/tags/" + period, ""},
		{"POST", "/api/v1/admin/tags", `{"bizTag":"order","step":10}`},
		{"POST", "/api/v1/admin/tags", `{"bizTag":"` + tomorrow + `","step":10}`},
	} {
		if code, body := call(tt.method, tt.path, tt.body); code != http.StatusConflict || !strings.Contains(body, "grouped_tag_row") {
			t.Errorf("%s %s %s = %d %s, want 409 grouped_tag_row", tt.method, tt.path, tt.body, code, body)
		}
	}
	if code, body := call("GET", "/api/v1/segment/order/formatted?count=1", ""); code != 200 || !strings.Contains(body, "000004") {
		t.Errorf("formatted ID after the refusals = %d %s, want the 4th of the period", code, body)
	}
}
