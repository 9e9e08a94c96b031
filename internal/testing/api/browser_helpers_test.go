package api_test

import (
	"context"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// newBrowser starts headless Chromium (exe, from chromium(t)) with a fresh profile, a
// 1280×1000 window and name resolution for loopback only, and returns its context; the
// browser is closed when the test ends. With watch true it also collects the console's errors,
// warnings and exceptions, except those ignore accepts (nil: none); problems stops watching
// (call it once the page is done) and returns them. Every console line is logged.
func newBrowser(t *testing.T, exe string, watch bool, ignore func(chromedp.ConsoleMessage) bool) (ctx context.Context, problems func() []string) {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		// Loopback only: every other host name fails to resolve.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
	)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Start the browser before subscribing to its console.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	if !watch {
		return ctx, func() []string { return nil }
	}
	consoleDone := make(chan struct{})
	consoleCtx, stopConsole := context.WithCancel(ctx)
	messages := chromedp.Console(consoleCtx)
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { stopConsole(); <-consoleDone }) }
	t.Cleanup(stop) // runs before the browser's cleanup
	problems = func() []string {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			t.Logf("browser console: %s (%s %s)", m, m.Source, m.URL)
			if ignore != nil && ignore(m) {
				continue
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				mu.Lock()
				seen = append(seen, m.String()+" at "+m.URL)
				mu.Unlock()
			}
		}
	}()
	return ctx, problems
}
