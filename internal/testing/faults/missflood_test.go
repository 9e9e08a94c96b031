package faults

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMissFlood: 8 connections from one address (127.0.0.1) ask for random
// tag names as fast as they can; once the flood runs, a tag is inserted
// into PostgreSQL with plain SQL, and a request from the same address (as
// every client behind a proxy or NAT) asks for it. It must be served
// within 1 s of that first request, whatever the flood sends: lookups cost
// per distinct name, batched into rounds, with no per-client limit to
// spend. The flood's names answer -2 (looked up, no row), never -3 (which
// points at the database) nor -5.
func TestMissFlood(t *testing.T) {
	t.Parallel()
	d := newDB(t, "postgres")
	d.create(t, "warm", 1, 1000)
	p := start(t, t.TempDir(), "--segment-dsn", d.direct, "--migrate=false", "--snowflake=false", "--wait-timeout", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Timeout: time.Second}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 16}}
	get := func(ctx context.Context, path string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL(path), nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	var mu sync.Mutex
	codes := map[string]int{}
	var sent atomic.Int64
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				status, body, err := get(floodCtx, fmt.Sprintf("/api/segment/get/random-%016x", rand.Uint64()))
				if err != nil {
					continue
				}
				sent.Add(1)
				key := fmt.Sprint(status)
				if i := strings.Index(body, "Result{id="); i >= 0 {
					key += " " + strings.SplitN(body[i+len("Result{id="):], ",", 2)[0]
				}
				mu.Lock()
				codes[key]++
				mu.Unlock()
			}
		})
	}
	defer func() { stopFlood(); wg.Wait() }()
	for sent.Load() < 2000 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond) // polls the flood's progress
	}
	if _, err := d.raw.ExecContext(ctx, `INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES ('inserted-during-flood', 5000, 100, NULL, now())`); err != nil {
		t.Fatalf("insert by SQL: %v", err)
	}
	// The first request and any retry of it share one deadline: 1 s after
	// the first was sent.
	first := time.Now()
	within, cancelWithin := context.WithDeadline(ctx, first.Add(time.Second))
	defer cancelWithin()
	var answers []string
	served := false
	for !served && within.Err() == nil {
		status, body, err := get(within, "/api/segment/get/inserted-during-flood")
		switch {
		case err == nil && status == 200 && body == "5000":
			served = true
		case err != nil:
			answers = append(answers, err.Error())
		default:
			answers = append(answers, fmt.Sprintf("%d %s", status, body))
		}
	}
	took := time.Since(first)
	stopFlood()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("flood: %d requests, answers %v; the new tag served: %v after %v (%d answers before: %q)",
		sent.Load(), codes, served, took.Round(time.Millisecond), len(answers), answers)
	if !served {
		t.Errorf("tag inserted by SQL not served within 1 s of its first request from the flooding address; answers %q", answers)
	}
	for k, n := range codes {
		if k != "500 -2" {
			t.Errorf("flood answer %q (%d times), want only 500 -2 (looked up, no row)", k, n)
		}
	}
	r := row{Scenario: "5 hostile input", Size: "PostgreSQL, 8 connections of random tag names and a new tag, all from one address",
		IDs: 1, Errors: map[string]int{"500 -2": codes["500 -2"]}, Recovery: "n/a",
		Cmd:  "go test -race -count=1 -run '^TestMissFlood$' ./faults/",
		Note: fmt.Sprintf("%d flood requests; the new tag served %v after its first request (bound 1 s)", sent.Load(), took.Round(time.Millisecond))}
	report.add(t, r)
}
