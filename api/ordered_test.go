package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAdminOrderedTag: "ordered": true on the admin API makes an ordered
// tag (docs/contract.md §12): Leaf's route and the batch route take every ID
// from the table (max_id grows by exactly the IDs answered), and the admin
// list and the buffers API show the tag as ordered.
func TestAdminOrderedTag(t *testing.T) {
	srv := adminServer(t, "tok")
	if got := call(t, "POST", srv.URL+"/api/v1/admin/tags", "tok", `{"bizTag":"ev","step":1000,"ordered":true}`); got.status != 201 || !strings.Contains(got.body, `"ordered":true`) {
		t.Fatalf("create ordered = %d %s, want 201 with \"ordered\":true", got.status, got.body)
	}
	if got := call(t, "POST", srv.URL+"/api/v1/admin/tags", "tok", `{"bizTag":"plain","step":1000}`); got.status != 201 || strings.Contains(got.body, `"ordered"`) {
		t.Fatalf("create plain = %d %s, want 201 without \"ordered\"", got.status, got.body)
	}
	for i, want := range []string{"1", "2"} {
		if got := call(t, "GET", srv.URL+"/api/segment/get/ev", "", ""); got.status != 200 || got.body != want {
			t.Errorf("Get #%d = %d %q, want 200 %q", i+1, got.status, got.body, want)
		}
	}
	if got := call(t, "GET", srv.URL+"/api/v1/segment/ev?count=3", "", ""); got.status != 200 || !strings.Contains(got.body, `["3","4","5"]`) {
		t.Errorf("batch of 3 = %d %s, want IDs 3, 4, 5", got.status, got.body)
	}
	list := call(t, "GET", srv.URL+"/api/v1/admin/tags", "tok", "")
	var tags struct {
		Tags []struct {
			BizTag  string `json:"bizTag"`
			MaxID   string `json:"maxId"`
			Ordered bool   `json:"ordered"`
		} `json:"tags"`
	}
	if err := json.Unmarshal([]byte(list.body), &tags); err != nil {
		t.Fatalf("list: %v: %s", err, list.body)
	}
	for _, tg := range tags.Tags {
		want := tg.BizTag == "ev"
		if tg.Ordered != want || (want && tg.MaxID != "6") {
			t.Errorf("list row %+v, want ordered %v (and max_id 6 for ev: nothing buffered)", tg, want)
		}
	}
	bufs := call(t, "GET", srv.URL+"/api/v1/segment/buffers?prefix=ev", "", "")
	var b struct {
		Buffers []struct {
			BizTag  string `json:"bizTag"`
			Ordered bool   `json:"ordered"`
			Batches string `json:"batches"`
			Issued  string `json:"issued"`
		} `json:"buffers"`
	}
	if err := json.Unmarshal([]byte(bufs.body), &b); err != nil || len(b.Buffers) != 1 {
		t.Fatalf("buffers = %v %s, want one buffer", err, bufs.body)
	}
	if got := b.Buffers[0]; !got.Ordered || got.Batches != "3" || got.Issued != "5" {
		t.Errorf("buffers ev = %+v, want ordered, 3 batches, 5 issued", got)
	}
}
