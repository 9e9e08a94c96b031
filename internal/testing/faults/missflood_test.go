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

// TestMissFlood: 8 connections from one client (127.0.0.1) ask for random
// tag names as fast as they can, spending that client's miss-lookup limit;
// 1 s into the flood a tag is inserted into PostgreSQL, and a second client
// (127.0.0.2, its own source address on loopback) asks for it every 10 ms.
// It must be served within 2 s of the insert. The flooding client's refused
// lookups must answer their own code, -5, never -3 (which points at the
// database), and the names looked up -2; the other client is never refused
// -5 (its limit is its own).
func TestMissFlood(t *testing.T) {
	t.Parallel()
	d := newDB(t, "postgres")
	d.create(t, "warm", 1, 1000)
	p := start(t, t.TempDir(), "--segment-dsn", d.direct, "--migrate=false", "--snowflake=false", "--wait-timeout", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()

	client := func(ip string) *http.Client {
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 16}}
	}
	get := func(c *http.Client, path string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL(path), nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	flood := client("127.0.0.1")
	var mu sync.Mutex
	codes := map[string]int{}
	var sent atomic.Int64
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				status, body, err := get(flood, fmt.Sprintf("/api/segment/get/random-%016x", rand.Uint64()))
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
	time.Sleep(time.Second)
	d.create(t, "inserted-during-flood", 5000, 100)
	inserted := time.Now()
	other := client("127.0.0.2")
	var served time.Duration
	var last string
	limitedOther := 0 // answers -5 to the other client: its limit is its own
	for served == 0 && time.Since(inserted) < 5*time.Second {
		status, body, err := get(other, "/api/segment/get/inserted-during-flood")
		switch {
		case err == nil && status == 200 && body == "5000":
			served = time.Since(inserted)
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("%d %s", status, body)
			if strings.Contains(body, "Result{id=-5,") {
				limitedOther++
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopFlood()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("flood: %d requests, answers %v; new tag of the other client served %v after its insert", sent.Load(), codes, served)
	if served == 0 || served > 2*time.Second {
		t.Errorf("other client's new tag served after %v (0: not within 5 s; last answer %s), want within 2 s", served, last)
	}
	if limitedOther > 0 {
		t.Errorf("the other client was refused -5 %d times: the flood spent its lookups", limitedOther)
	}
	if codes["500 -3"] > 0 {
		t.Errorf("flood answered -3 %d times, want -5 for a spent lookup limit", codes["500 -3"])
	}
	if codes["500 -5"] == 0 || codes["500 -2"] == 0 {
		t.Errorf("flood answers %v, want both -2 (looked up) and -5 (limit spent)", codes)
	}
	for k := range codes {
		if k != "500 -2" && k != "500 -5" {
			t.Errorf("flood answer %q (%d times), want only -2 and -4", k, codes[k])
		}
	}
	r := row{Scenario: "5 hostile input", Size: "PostgreSQL, 8 connections of random tag names from one address, a new tag asked by another",
		IDs: 1, Errors: map[string]int{"500 -2": codes["500 -2"], "500 -5": codes["500 -5"]}, Recovery: "n/a",
		Cmd:  "go test -race -count=1 -run '^TestMissFlood$' ./faults/",
		Note: fmt.Sprintf("%d flood requests; the other client's new tag served %v after its insert (bound 2 s)", sent.Load(), served.Round(time.Millisecond))}
	report.add(t, r)
}
