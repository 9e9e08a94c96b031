package api_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
)

// TestGroupsCardInBrowser: the dashboard's grouped-tags card shows the
// current period, the IDs used against the width's capacity and when the
// next period's row was prepared, in headless Chromium against the real
// handler.
func TestGroupsCardInBrowser(t *testing.T) {
	exe := chromium(t)
	ctx := context.Background()
	st := openStore(t, dbtest.SQLite(t))
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	clock := clocktest.New(time.Date(2026, 12, 1, 23, 57, 0, 0, time.UTC))
	groups, err := group.New(ctx, gen, st, group.Config{
		PeriodsPath: filepath.Join(t.TempDir(), "group-periods.json"), Clock: clock, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { groups.Close() })
	if err := groups.Declare(ctx, store.Group{BizTag: "ord", Grp: "day", TimeZone: "UTC", Format: "ORD{yyyyMMdd}{seq:6}", Step: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := groups.Next(ctx, "ord", 25, nil); err != nil {
		t.Fatal(err)
	}
	groups.Prepare(ctx) // 3 min before midnight: within PrepareAhead (5 min)
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st, Groups: groups, Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}))
	t.Cleanup(srv.Close)

	bctx, _ := newBrowser(t, exe, false, nil)
	step, stepCancel := context.WithTimeout(bctx, 60*time.Second)
	defer stepCancel()
	row := `#groups-body tr[data-tag="ord"]`
	if err := chromedp.Do(step,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(row+" .used")),
	); err != nil {
		t.Fatalf("open dashboard: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(step, chromedp.Evaluate[string](`document.querySelector(`+jsString(sel)+`).textContent`))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	if got := text(row + " .period"); !strings.HasPrefix(got, "20261201 until 2026-12-02T00:00:00Z") {
		t.Errorf("period cell = %q, want 20261201 until 2026-12-02T00:00:00Z", got)
	}
	if got := text(row + " .used"); got != "25 / 999,999 (0.00%)" {
		t.Errorf("used cell = %q, want 25 / 999,999 (0.00%%)", got)
	}
	if got := text(row + " .next"); got != "20261202 · row prepared 2026-12-01T23:57:00Z" {
		t.Errorf("next cell = %q, want the prepared row of 20261202", got)
	}
	png, err := chromedp.Run(step, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := filepath.Join(artifactDir(t), "dashboard-groups.png")
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatalf("write screenshot: %v", err)
	}
	t.Logf("screenshot: %s", out)
}
