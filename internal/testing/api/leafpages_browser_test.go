package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// TestLeafPagesInBrowser opens Leaf's /cache and /db in headless Chromium
// against the real handler on a loopback port: the pages load the Bootstrap
// stylesheet they link (served by leaf-go, allowed by the pages' CSP) and
// show a Bootstrap-styled table of the tags; an unknown tag asked for with
// the browser's own Accept header gets Spring's HTML error page, as from
// Leaf. Nothing is logged to the console.
func TestLeafPagesInBrowser(t *testing.T) {
	exe := chromium(t)
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{},
		store.Row{BizTag: "leaf-segment-test", MaxID: 1, Step: 2000},
		store.Row{BizTag: "order", MaxID: 1234567, Step: 1000})
	s.get(t, "/api/segment/get/leaf-segment-test")

	ctx, problems := newBrowser(t, exe, true, func(m chromedp.ConsoleMessage) bool {
		// The error page is a 500 on purpose, and Leaf's pages link no icon (Spring Boot
		// serves its own /favicon.ico, leaf-go none): Chrome logs both as failed loads.
		return m.Source == "network" && (strings.Contains(m.Text, "500") && strings.Contains(m.URL, "/no-such-tag") ||
			strings.Contains(m.Text, "404") && strings.HasSuffix(m.URL, "/favicon.ico"))
	})

	step, stepCancel := context.WithTimeout(ctx, 60*time.Second)
	defer stepCancel()
	for _, tt := range []struct {
		path string
		want []string // texts of the table's cells, in part
	}{
		{"/cache", []string{"name", "leaf-segment-test", "true", "2,001", "2,000", "order"}},
		{"/db", []string{"tag", "leaf-segment-test", "2,001", "order", "1,234,567", "1,000"}},
	} {
		if _, err := chromedp.Run(step, chromedp.Navigate(s.srv.URL+tt.path)); err != nil {
			t.Fatalf("open %s: %v", tt.path, err)
		}
		// Bootstrap's .table is width 100% and collapses its borders; without
		// the stylesheet the table is as wide as its text.
		style, err := chromedp.Run(step, chromedp.Evaluate[map[string]any](`(() => {
			const tbl = document.querySelector('table.table');
			const cs = getComputedStyle(tbl);
			return {
				sheets: document.styleSheets.length,
				rules: document.styleSheets.length ? document.styleSheets[0].cssRules.length : 0,
				collapse: cs.borderCollapse,
				full: Math.abs(tbl.getBoundingClientRect().width - document.body.getBoundingClientRect().width) < 1,
				cells: Array.from(document.querySelectorAll('th,td')).map(c => c.textContent),
			};
		})()`))
		if err != nil {
			t.Fatalf("%s: read the page: %v", tt.path, err)
		}
		if style["sheets"] != float64(1) || style["rules"].(float64) < 100 || style["collapse"] != "collapse" || style["full"] != true {
			t.Errorf("%s: stylesheets %v, rules %v, border-collapse %v, full width %v; want Bootstrap's table style",
				tt.path, style["sheets"], style["rules"], style["collapse"], style["full"])
		}
		var cells []string
		for _, c := range style["cells"].([]any) {
			cells = append(cells, c.(string))
		}
		for _, w := range tt.want {
			found := false
			for _, c := range cells {
				found = found || c == w
			}
			if !found {
				t.Errorf("%s: no cell %q in %q", tt.path, w, cells)
			}
		}
	}

	if _, err := chromedp.Run(step, chromedp.Navigate(s.srv.URL+"/api/segment/get/no-such-tag")); err != nil {
		t.Fatalf("open the unknown tag: %v", err)
	}
	page, err := chromedp.Run(step, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatalf("read the error page: %v", err)
	}
	for _, w := range []string{"Whitelabel Error Page", "There was an unexpected error (type=Internal Server Error, status=500).",
		"Result{id=-2, status=EXCEPTION}"} {
		if !strings.Contains(page, w) {
			t.Errorf("unknown tag in the browser shows %q, want %q in it", page, w)
		}
	}

	for _, p := range problems() {
		t.Errorf("browser console: %s", p)
	}
}
