package api_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/store"
)

// TestBatchBadCounts: only plain decimal digits from 1 to the maximum are a
// count; everything else is 400 bad_count with a message naming count and
// its range, and takes no ID.
func TestBatchBadCounts(t *testing.T) {
	srv, _ := newServer(t, demo)
	for _, c := range []string{"0", "-1", "10001", "abc", "1e3", "", "99999999999999999999",
		"%2B5", "+5", "%205", "5%20", "0x10", "0b1", "1.0", "5,6", "000", "00010001",
		"99999999999999999999999999999999999999", "1&count=2", "5&count=5", "%EF%BC%95" /* fullwidth 5 */} {
		for _, path := range []string{"/api/v1/segment/leaf-segment-test?count=", "/api/v1/snowflake?count="} {
			got := do(t, "GET", srv.URL+path+c)
			if got.status != 400 || !strings.Contains(got.body, `"code":"bad_count"`) ||
				!strings.Contains(got.body, "count must be an integer from 1 to 10000") {
				t.Errorf("GET %s%s = %d %s, want 400 bad_count naming count and 1 to 10000", path, c, got.status, got.body)
			}
		}
	}
	if got := do(t, "GET", srv.URL+"/api/v1/segment/leaf-segment-test"); got.status != 200 || got.body != `{"ids":["1"]}` {
		t.Errorf("GET without count = %d %q, want one ID (the refused counts took none)", got.status, got.body)
	}
	for _, tt := range []struct{ give, want string }{
		{"2", `{"ids":["2","3"]}`},
		{"02", `{"ids":["4","5"]}`}, // leading zeros are harmless: decimal, never octal
		{"10000", ""},
	} {
		got := do(t, "GET", srv.URL+"/api/v1/segment/leaf-segment-test?count="+tt.give)
		if got.status != 200 || (tt.want != "" && got.body != tt.want) {
			t.Errorf("GET ?count=%s = %d %.80s, want 200 %s", tt.give, got.status, got.body, tt.want)
		}
	}
	if got := do(t, "GET", srv.URL+"/api/v1/segment/nope?count=5"); got.status != 404 || !strings.Contains(got.body, `"leafCode":-2`) {
		t.Errorf("unknown tag batch = %d %s, want 404 with leafCode -2", got.status, got.body)
	}
	if got := do(t, "POST", srv.URL+"/api/v1/segment/leaf-segment-test?count=2"); got.status != 405 {
		t.Errorf("POST batch = %d, want 405", got.status)
	}
}

// TestBatchSpansSegmentsAndPasses2p53: a batch larger than a segment spans
// several; IDs beyond 2^53 survive JSON as strings, exactly.
func TestBatchSpansSegmentsAndPasses2p53(t *testing.T) {
	const base = int64(1) << 60
	srv, _ := newServer(t, store.Row{BizTag: "big", MaxID: base, Step: 300})
	var all []int64
	for i := 0; i < 5; i++ {
		got := do(t, "GET", srv.URL+"/api/v1/segment/big?count=1000")
		if got.status != 200 {
			t.Fatalf("batch %d = %d %s", i, got.status, got.body)
		}
		var a struct{ IDs []string }
		if err := json.Unmarshal([]byte(got.body), &a); err != nil || len(a.IDs) != 1000 {
			t.Fatalf("batch %d = %s (%v), want 1000 IDs", i, got.body, err)
		}
		for _, s := range a.IDs {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("ID %q is not an int64", s)
			}
			all = append(all, n)
		}
	}
	for i, id := range all {
		// One server, one tag: consecutive IDs from base, no gap, no repeat.
		if want := base + int64(i); id != want {
			t.Fatalf("ID %d = %d, want %d", i, id, want)
		}
	}
}

func TestSnowflakeBatch(t *testing.T) {
	srv := newSnowflakeServer(t, 5)
	got := do(t, "GET", srv.URL+"/api/v1/snowflake?count=10000")
	var a struct{ IDs []string }
	if err := json.Unmarshal([]byte(got.body), &a); err != nil || got.status != 200 || len(a.IDs) != 10000 {
		t.Fatalf("snowflake batch = %d (%v), want 10000 IDs", got.status, err)
	}
	seen := map[string]bool{}
	for _, s := range a.IDs {
		if seen[s] {
			t.Fatalf("duplicate %s", s)
		}
		seen[s] = true
	}
}
