package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

type pageJSON struct {
	Total   int `json:"total"`
	Buffers []struct {
		BizTag        string   `json:"bizTag"`
		InitOK        bool     `json:"initOk"`
		RunwaySeconds *float64 `json:"runwaySeconds"`
	} `json:"buffers"`
	Next string `json:"next"`
}

func getPage(t *testing.T, s *opsServer, query string) pageJSON {
	t.Helper()
	got := s.get(t, "/api/v1/segment/buffers?"+query)
	if got.status != 200 {
		t.Fatalf("GET buffers?%s = %d %s", query, got.status, got.body)
	}
	var p pageJSON
	if err := json.Unmarshal([]byte(got.body), &p); err != nil {
		t.Fatalf("buffers JSON %s: %v", got.body, err)
	}
	return p
}

// TestSegmentBuffersPaging: 250 tags, 20 of them in use at different rates.
// Pages of limit tags follow each other by the next cursor until none is
// left, together listing every tag once; the default page is 100 tags; the
// default order puts the tags with a runway first, shortest first; the
// prefix filters and total counts what matches.
func TestSegmentBuffersPaging(t *testing.T) {
	var rows []store.Row
	for i := range 250 {
		rows = append(rows, store.Row{BizTag: fmt.Sprintf("t%03d", i), MaxID: 1, Step: 1000})
	}
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{}, rows...)
	for i := range 20 {
		for range 1 + 10*i { // t000 least used, t019 most: the shortest runway
			s.get(t, fmt.Sprintf("/api/segment/get/t%03d", i))
		}
	}
	getPage(t, s, "") // a first rate sample
	for i := range 20 {
		for range 1 + 10*i {
			s.get(t, fmt.Sprintf("/api/segment/get/t%03d", i))
		}
	}

	if p := getPage(t, s, ""); p.Total != 250 || len(p.Buffers) != 100 || p.Next == "" {
		t.Fatalf("default page: total %d, %d buffers, next %q; want 250, 100, a cursor", p.Total, len(p.Buffers), p.Next)
	}
	for _, sort := range []string{"runway", "tag"} {
		var seen []string
		var runways []float64
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("sort=%s: more than 10 pages of 30 for 250 tags", sort)
			}
			p := getPage(t, s, "limit=30&sort="+sort+"&cursor="+url.QueryEscape(cursor))
			for _, b := range p.Buffers {
				seen = append(seen, b.BizTag)
				if b.RunwaySeconds != nil {
					runways = append(runways, *b.RunwaySeconds)
				}
			}
			if p.Next == "" {
				break
			}
			cursor = p.Next
		}
		if len(seen) != 250 || len(slices.Compact(slices.Sorted(slices.Values(seen)))) != 250 {
			t.Errorf("sort=%s: pages listed %d tags, %d distinct; want all 250 once", sort, len(seen), len(slices.Compact(slices.Sorted(slices.Values(seen)))))
		}
		switch sort {
		case "tag":
			if !slices.IsSorted(seen) {
				t.Errorf("sort=tag: tags out of order: %v", seen[:10])
			}
		case "runway":
			if len(runways) == 0 || !slices.IsSorted(runways) || !strings.HasPrefix(seen[0], "t0") || seen[0] >= "t020" {
				t.Errorf("sort=runway: first tags %v, runways %v; want the used tags first, shortest runway first", seen[:5], runways)
			}
		}
	}
	if p := getPage(t, s, "prefix=t01&limit=1000"); p.Total != 10 || len(p.Buffers) != 10 || p.Next != "" {
		t.Errorf("prefix=t01: total %d, %d buffers, next %q; want 10, 10, none", p.Total, len(p.Buffers), p.Next)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "sort=rate", "cursor=zzz", "sort=tag&cursor=i:1:t001"} {
		got := s.get(t, "/api/v1/segment/buffers?"+q)
		if got.status != 400 || !strings.Contains(got.body, `"code":"bad_`) {
			t.Errorf("GET buffers?%s = %d %s, want 400 bad_…", q, got.status, got.body)
		}
	}
}
