package api_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// chromium returns the browser to drive: $LEAF_CHROMIUM, else Debian's
// chromium on PATH. Without one the test is skipped, or fails under CI=true.
// In -short mode the test is skipped.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: needs Chromium")
	}
	if p := os.Getenv("LEAF_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: CI must install it (apt-get install -y chromium) or set LEAF_CHROMIUM")
	}
	t.Skip("chromium not found; install it with `apt-get install -y chromium` or set LEAF_CHROMIUM to a Chrome binary")
	return ""
}

// artifactDir is where the browser test leaves its screenshot:
// $LEAF_TEST_ARTIFACTS, else testdata/out at the repository root (ignored
// by git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LEAF_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "testdata", "out")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifact folder: %v", err)
	}
	return dir
}

// TestDashboardInBrowser drives the dashboard in headless Chromium against
// the real handler on a loopback port, with a real segment generator.
func TestDashboardInBrowser(t *testing.T) {
	exe := chromium(t)
	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{},
		store.Row{BizTag: "leaf-segment-test", MaxID: 1, Step: 2000},
		store.Row{BizTag: "order", MaxID: 1, Step: 100})
	for range 150 {
		s.get(t, "/api/segment/get/order")
	}
	s.get(t, "/api/segment/get/leaf-segment-test")

	ctx, problems := newBrowser(t, exe, true, func(m chromedp.ConsoleMessage) bool {
		// The snowflake panel asks /api/v1/snowflake/status, which answers 503 while
		// snowflake mode is off; Chrome logs that failed load as a network error.
		return m.Source == "network" && strings.Contains(m.Text, "503") &&
			strings.HasSuffix(m.URL, "/api/v1/snowflake/status")
	})

	step, stepCancel := context.WithTimeout(ctx, 60*time.Second)
	defer stepCancel()
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(step, chromedp.Evaluate[string](`document.querySelector(`+jsString(sel)+`).textContent`))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}

	// The tag rows appear with live numbers.
	if err := chromedp.Do(step,
		chromedp.Navigate(s.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-tag="order"] .issued`)),
	); err != nil {
		t.Fatalf("open dashboard: %v", err)
	}
	if _, err := chromedp.Run(step, chromedp.Poll[bool](
		`document.querySelector('tr[data-tag="order"] .issued').textContent.startsWith("150 issued")`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("order row shows %q, want 150 issued: %v", text(`tr[data-tag="order"] .issued`), err)
	}
	before := text(`tr[data-tag="order"] .segs`)
	for range 400 {
		s.get(t, "/api/segment/get/order")
	}
	if _, err := chromedp.Run(step, chromedp.Poll[bool](
		`document.querySelector('tr[data-tag="order"] .issued').textContent.startsWith("550 issued")`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("order row shows %q after 400 more IDs, want 550 issued: %v", text(`tr[data-tag="order"] .issued`), err)
	}
	if after := text(`tr[data-tag="order"] .segs`); after == before {
		t.Errorf("segment bars did not change after 400 IDs: %q", after)
	}
	if got := text(`tr[data-tag="order"] .rate`); got == "0/s" {
		t.Errorf("rate = %q after 400 IDs, want a positive rate", got)
	}
	if got := text(`tr[data-tag="leaf-segment-test"] .step`); got != "2,000 / 2,000" {
		t.Errorf("leaf-segment-test step = %q, want 2,000 / 2,000", got)
	}
	// The header shows the build from GET /api/v1/info.
	if _, err := chromedp.Run(step, chromedp.Poll[bool](
		`document.querySelector('#build').textContent.startsWith("v0.0.0-test · 0123456789ab · go1.26.8 · up ")`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("header build = %q, want v0.0.0-test · 0123456789ab · go1.26.8 · up …: %v", text("#build"), err)
	}
	if got := text("#sf-off"); got != "snowflake mode off" {
		t.Errorf("snowflake panel = %q, want snowflake mode off", got)
	}

	// The inspector decodes the second worked example of docs/contract.md §6,
	// an ID past 2^53.
	if err := chromedp.Do(step,
		chromedp.SetValue(chromedp.CSS("#decode-id"), "1724551110457221119"),
		chromedp.Click(chromedp.CSS("#decode-form button")),
		chromedp.WaitVisible(chromedp.CSS("#inspect-result")),
	); err != nil {
		t.Fatalf("decode: %v", err)
	}
	tests := []struct {
		sel, want string
	}{
		{"#r-id", "1724551110457221119"},
		{"#r-utc", "2023-11-14T22:13:20Z"},
		{"#r-ts", "1700000000000 ms"},
		{"#r-worker", "237"},
		{"#r-dc", "7"},
		{"#r-machine", "13"},
		{"#r-seq", "4095"},
	}
	for _, tt := range tests {
		if got := text(tt.sel); got != tt.want {
			t.Errorf("decode 1724551110457221119: %s = %q, want %q", tt.sel, got, tt.want)
		}
	}
	// The largest ID: every bit but the sign set, exact only with BigInt.
	if err := chromedp.Do(step,
		chromedp.SetValue(chromedp.CSS("#decode-id"), "9223372036854775807"),
		chromedp.Click(chromedp.CSS("#decode-form button")),
	); err != nil {
		t.Fatalf("decode max: %v", err)
	}
	for _, tt := range []struct{ sel, want string }{
		{"#r-id", "9223372036854775807"},
		{"#r-ts", "3487858230208 ms"}, // epoch + 2^41 - 1
		{"#r-worker", "1023"},
		{"#r-seq", "4095"},
	} {
		if got := text(tt.sel); got != tt.want {
			t.Errorf("decode 2^63-1: %s = %q, want %q", tt.sel, got, tt.want)
		}
	}
	if err := chromedp.Do(step,
		chromedp.SetValue(chromedp.CSS("#decode-id"), "1724551110457221119"),
		chromedp.Click(chromedp.CSS("#decode-form button")),
	); err != nil {
		t.Fatalf("decode: %v", err)
	}
	bits, err := chromedp.Run(step, chromedp.Evaluate[map[string]int](`(() => {
		const n = {};
		for (const g of document.querySelectorAll("#bits .bit-group")) {
			const f = [...g.classList].find((c) => c.startsWith("b-"));
			n[f] = (n[f] || 0) + g.querySelectorAll(".bit").length;
		}
		n.all = document.querySelectorAll("#bits .bit").length;
		return n;
	})()`))
	if err != nil {
		t.Fatalf("read bits: %v", err)
	}
	wantBits := map[string]int{"b-sign": 1, "b-time": 41, "b-dc": 5, "b-machine": 5, "b-seq": 12, "all": 64}
	for k, v := range wantBits {
		if bits[k] != v {
			t.Errorf("bit drawing: %s has %d bits, want %d (all: %v)", k, bits[k], v, bits)
		}
	}

	// The encoder reproduces the first worked example of docs/contract.md §6.
	if err := chromedp.Do(step,
		chromedp.SetValue(chromedp.CSS("#enc-ts"), "1288834975657"),
		chromedp.SetValue(chromedp.CSS("#enc-dc"), "1"),
		chromedp.SetValue(chromedp.CSS("#enc-machine"), "1"),
		chromedp.SetValue(chromedp.CSS("#enc-seq"), "0"),
		chromedp.Click(chromedp.CSS("#encode-form button")),
	); err != nil {
		t.Fatalf("encode: %v", err)
	}
	if got := text("#r-id"); got != "4194439168" {
		t.Errorf("encode 1288834975657/1/1/0 = %q, want 4194439168", got)
	}

	// Leave the page showing the big decode for the screenshot.
	if err := chromedp.Do(step,
		chromedp.SetValue(chromedp.CSS("#decode-id"), "1724551110457221119"),
		chromedp.Click(chromedp.CSS("#decode-form button")),
		chromedp.Sleep(1200*time.Millisecond), // one more refresh
	); err != nil {
		t.Fatalf("decode again: %v", err)
	}
	png, err := chromedp.Run(step, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := filepath.Join(artifactDir(t), "dashboard.png")
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatalf("write screenshot: %v", err)
	}
	t.Logf("screenshot: %s", out)

	for _, p := range problems() {
		t.Errorf("browser console: %s", p)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
