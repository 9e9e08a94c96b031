package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
)

// TestDashboard100kTags drives the dashboard in headless Chromium against
// the real handler with 100,000 tags in PostgreSQL (one INSERT … SELECT
// generate_series; the generator caches all of them at start). The page
// shows one page of 50 tags, the ones in use first (shortest runway), with
// the count of all 100,000; the search narrows it to a prefix; next and
// previous page through; and the table keeps updating (the poll goes on).
// The buffers route's default page of 100 tags stays under 200 kB.
func TestDashboard100kTags(t *testing.T) {
	exe := chromium(t)
	storeDSN := dbtest.Postgres(t)
	openStore(t, storeDSN) // migrates
	ctx0 := context.Background()
	conn, err := pgx.Connect(ctx0, storeDSN)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if _, err := conn.Exec(ctx0, `INSERT INTO leaf_alloc (biz_tag, max_id, step, description)
		SELECT 'tag-' || lpad(g::text, 6, '0'), 1, 1000, '' FROM generate_series(0, 99999) g`); err != nil {
		t.Fatalf("seed 100,000 tags: %v", err)
	}
	conn.Close(ctx0)
	s := newOpsServer(t, storeDSN, segment.Config{})
	if n := len(s.gen.Stats()); n != 100_000 {
		t.Fatalf("generator caches %d tags, want 100,000", n)
	}
	// Three tags in use, tag-054321 the busiest: the shortest runway.
	for tag, n := range map[string]int{"tag-054321": 600, "tag-000007": 200, "tag-099999": 50} {
		for range n {
			s.get(t, "/api/segment/get/"+tag)
		}
	}
	s.get(t, "/api/v1/segment/buffers?limit=1") // a first rate sample
	time.Sleep(300 * time.Millisecond)
	for tag, n := range map[string]int{"tag-054321": 600, "tag-000007": 200, "tag-099999": 50} {
		for range n {
			s.get(t, "/api/segment/get/"+tag)
		}
	}

	// Keep them in use, so that their rates (over the last 10 s) stay
	// positive while the test runs.
	busyCtx, stopBusy := context.WithCancel(ctx0)
	var busy sync.WaitGroup
	defer func() { stopBusy(); busy.Wait() }()
	for tag, every := range map[string]time.Duration{"tag-054321": 5 * time.Millisecond, "tag-000007": 20 * time.Millisecond, "tag-099999": 50 * time.Millisecond} {
		busy.Go(func() {
			for busyCtx.Err() == nil {
				req, _ := http.NewRequestWithContext(busyCtx, http.MethodGet, s.srv.URL+"/api/segment/get/"+tag, nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				time.Sleep(every)
			}
		})
	}

	ctx, _ := newBrowser(t, exe, false, nil)
	step, stepCancel := context.WithTimeout(ctx, 90*time.Second)
	defer stepCancel()
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(step, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	// waitFor polls cond (JavaScript, true when done) for up to 15 s.
	waitFor := func(what, cond string) {
		t.Helper()
		if _, err := chromedp.Run(step, chromedp.Poll[bool](cond,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			t.Fatalf("%s: %v; count %q, first rows %q", what, err, eval(`document.querySelector("#buffers-count").textContent`),
				eval(`[...document.querySelectorAll("#buffers-body tr[data-tag]")].slice(0, 5).map((r) => r.dataset.tag).join(" ")`))
		}
	}
	rowsJS := `document.querySelectorAll("#buffers-body tr[data-tag]").length`
	firstJS := `(document.querySelector("#buffers-body tr[data-tag]") || {dataset: {}}).dataset.tag`

	if err := chromedp.Do(step, chromedp.Navigate(s.srv.URL+"/")); err != nil {
		t.Fatalf("open dashboard: %v", err)
	}
	waitFor("first page of 50 of 100,000", rowsJS+` === 50 && document.querySelector("#buffers-count").textContent.includes("of 100,000")`)
	// The tags in use have a runway; the 99,997 others (none) come after.
	waitFor("the tags in use first", `[...document.querySelectorAll("#buffers-body tr[data-tag]")].slice(0, 3).map((r) => r.dataset.tag).sort().join(" ") === "tag-000007 tag-054321 tag-099999"`)

	// Still polling: more IDs of the top tag show up.
	before := eval(`document.querySelector('tr[data-tag="tag-054321"] .issued').textContent`)
	for range 100 {
		s.get(t, "/api/segment/get/tag-054321")
	}
	waitFor("the top row updates", `document.querySelector('tr[data-tag="tag-054321"] .issued').textContent !== `+jsString(before))

	// Next page, then back.
	page1 := eval(`[...document.querySelectorAll("#buffers-body tr[data-tag]")].map((r) => r.dataset.tag).join(" ")`)
	if err := chromedp.Do(step, chromedp.Click(chromedp.CSS("#buffers-next"))); err != nil {
		t.Fatalf("click next: %v", err)
	}
	waitFor("page 2", `document.querySelector("#buffers-count").textContent.startsWith("tags 51–100 of 100,000") && `+rowsJS+` === 50`)
	page2 := eval(`[...document.querySelectorAll("#buffers-body tr[data-tag]")].map((r) => r.dataset.tag).join(" ")`)
	for _, tag := range strings.Fields(page2) {
		if strings.Contains(" "+page1+" ", " "+tag+" ") {
			t.Errorf("page 2 repeats %s of page 1", tag)
			break
		}
	}
	if err := chromedp.Do(step, chromedp.Click(chromedp.CSS("#buffers-prev"))); err != nil {
		t.Fatalf("click previous: %v", err)
	}
	waitFor("back on page 1", `document.querySelector("#buffers-count").textContent.startsWith("tags 1–50 of 100,000")`)

	// Search by prefix: 100 tags start with tag-0543, the busiest first.
	if err := chromedp.Do(step, chromedp.SendKeys(chromedp.CSS("#buffers-search"), "tag-0543")); err != nil {
		t.Fatalf("type search: %v", err)
	}
	waitFor("search tag-0543", `document.querySelector("#buffers-count").textContent.includes("of 100,")`+
		` && !document.querySelector("#buffers-count").textContent.includes("100,000")`)
	if got := eval(firstJS); got != "tag-054321" {
		t.Errorf("first row for tag-0543 %q, want tag-054321", got)
	}
	if got := eval(`[...document.querySelectorAll("#buffers-body tr[data-tag]")].every((r) => r.dataset.tag.startsWith("tag-0543")) + ""`); got != "true" {
		t.Errorf("rows outside the prefix tag-0543 shown")
	}
	t.Logf("dashboard at 100,000 tags: %s", eval(`document.querySelector("#buffers-count").textContent`))
	t0 := time.Now()
	got := s.get(t, "/api/v1/segment/buffers")
	t.Logf("GET /api/v1/segment/buffers at 100,000 tags: %d bytes (limit 100), %v", len(got.body), time.Since(t0).Round(time.Millisecond))
	for _, path := range []string{"/api/v1/segment/buffers?prefix=none", "/api/v1/segment/buffers?sort=tag", "/api/v1/segment/buffers", "/cache", "/db"} {
		t0 := time.Now()
		a := s.get(t, path)
		t.Logf("GET %s at 100,000 tags: %d %d bytes, %v", path, a.status, len(a.body), time.Since(t0).Round(time.Millisecond))
	}
	if len(got.body) > 200_000 {
		t.Errorf("buffers page of 100 tags is %d bytes", len(got.body))
	}
}
