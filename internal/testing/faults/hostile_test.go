package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/waittest"
)

// TestHostileInput sends malformed and abusive requests to every route of a
// real leaf-server (SQLite store, demo tag, static snowflake): odd tag
// characters, 64 KiB paths, huge and non-numeric counts and IDs, wrong and
// made-up methods, a 2 MiB header. Every answer must come quickly, be a 4xx
// (or Leaf's 500 with a code where Leaf answers that way), never a 200 with
// an ID for input that is not valid, and the server must keep serving.
// The router itself is fuzzed in-process by api.FuzzRouter (make fuzz).
func TestHostileInput(t *testing.T) {
	t.Parallel()
	p := start(t, t.TempDir(), "--admin-token", "s3cret")
	long := strings.Repeat("a", 64*1024)
	tests := []struct {
		method, path string
		want         []int // acceptable statuses
	}{
		// odd tag characters on the Leaf routes (unknown tag: Leaf's 500 -2)
		{"GET", "/api/segment/get/%00", []int{400}},
		{"GET", "/api/segment/get/%0a%0d", []int{400}},
		{"GET", "/api/segment/get/..%2F..%2Fetc%2Fpasswd", []int{500}},
		{"GET", "/api/segment/get/%E2%80%AE%F0%9F%92%A9", []int{500}},
		{"GET", "/api/segment/get/%ff%fe", []int{400}},
		{"GET", "/api/segment/get/'%3B%20DROP%20TABLE%20leaf_alloc%3B--", []int{500}},
		{"GET", "/api/segment/get/a%20b", []int{500}},
		{"GET", "/api/segment/get/", []int{404}}, // Spring's "No message available", as Leaf
		{"GET", "/api/segment/get/" + strings.Repeat("x", 129), []int{400}},
		{"GET", "/api/snowflake/get/%00", []int{400}},
		{"GET", "/api/snowflake/get/" + strings.Repeat("x", 129), []int{400}},
		// very long paths (64 KiB)
		{"GET", "/api/segment/get/" + long, []int{400}},
		{"GET", "/api/snowflake/get/" + long, []int{400}},
		{"GET", "/api/v1/segment/" + long + "?count=1", []int{400}},
		{"GET", "/" + long, []int{404}},
		{"GET", "/api/v1/snowflake/decode/" + long, []int{400}},
		// huge and malformed counts
		{"GET", "/api/v1/segment/leaf-segment-test?count=10001", []int{400}},
		{"GET", "/api/v1/segment/leaf-segment-test?count=99999999999999999999999", []int{400}},
		{"GET", "/api/v1/segment/leaf-segment-test?count=-1", []int{400}},
		{"GET", "/api/v1/segment/leaf-segment-test?count=0", []int{400}},
		{"GET", "/api/v1/segment/leaf-segment-test?count=1e4", []int{400}},
		{"GET", "/api/v1/segment/leaf-segment-test?count=0x10", []int{400}},
		{"GET", "/api/v1/snowflake?count=10001", []int{400}},
		{"GET", "/api/v1/snowflake?count=abc", []int{400}},
		{"GET", "/api/v1/snowflake?count=" + long, []int{400}},
		// non-numeric and out-of-range IDs
		{"GET", "/api/v1/snowflake/decode/abc", []int{400}},
		{"GET", "/api/v1/snowflake/decode/-1", []int{400}},
		{"GET", "/api/v1/snowflake/decode/9223372036854775808", []int{400}},
		{"GET", "/api/v1/snowflake/decode/1.5", []int{400}},
		// Leaf answers these 200 with its errorMsg; so does leaf-go.
		{"GET", "/decodeSnowflakeId?snowflakeId=abc", []int{200}},
		{"GET", "/decodeSnowflakeId?snowflakeId=", []int{200}},
		{"GET", "/decodeSnowflakeId?snowflakeId=99999999999999999999", []int{200}},
		{"GET", "/decodeSnowflakeId", []int{400}},
		{"GET", "/api/v1/snowflake/encode?timestamp=abc&worker=1&sequence=1", []int{400}},
		{"GET", "/api/v1/snowflake/encode?timestamp=1&worker=1024&sequence=0", []int{400}},
		{"GET", "/api/v1/snowflake/encode?timestamp=1700000000000&worker=1&sequence=4096", []int{400}},
		{"GET", "/api/v1/snowflake/encode?timestamp=99999999999999999&worker=1&sequence=0", []int{400}},
		{"GET", "/api/v1/snowflake/encode", []int{400}},
		// wrong methods and made-up ones
		{"POST", "/api/v1/segment/leaf-segment-test?count=1", []int{405}},
		{"DELETE", "/api/v1/snowflake?count=1", []int{405}},
		{"PUT", "/api/v1/snowflake/decode/1", []int{405}},
		{"POST", "/healthz", []int{405}},
		{"PATCH", "/metrics", []int{200, 405}}, // promhttp serves any method; read-only
		{"BREW", "/api/segment/get/leaf-segment-test", []int{405, 400, 501}},
		{"TRACE", "/api/v1/segment/buffers", []int{405}},
		// admin routes without, with a wrong, and with a huge token
		{"POST", "/api/v1/admin/tags", []int{401}},
		{"DELETE", "/api/v1/admin/tags/leaf-segment-test", []int{401}},
	}
	var worst time.Duration
	var worstPath string
	codes := map[string]int{}
	for _, tt := range tests {
		t0 := time.Now()
		status, body, err := p.Do(context.Background(), tt.method, tt.path)
		took := time.Since(t0)
		short := tt.path
		if len(short) > 60 {
			short = short[:60] + fmt.Sprintf("…(%d bytes)", len(tt.path))
		}
		if err != nil {
			t.Errorf("%s %s: no answer: %v", tt.method, short, err)
			continue
		}
		codes[fmt.Sprint(status)]++
		if took > worst {
			worst, worstPath = took, tt.method+" "+short
		}
		ok := false
		for _, w := range tt.want {
			ok = ok || status == w
		}
		if !ok {
			t.Errorf("%s %s = %d %.200q, want one of %v", tt.method, short, status, body, tt.want)
		}
		if took > 2*time.Second {
			t.Errorf("%s %s answered after %v, want under 2 s", tt.method, short, took)
		}
	}
	// A 2 MiB header (net/http's limit is 1 MiB): 431, server still up.
	req, _ := http.NewRequest("GET", p.URL("/api/segment/get/leaf-segment-test"), nil)
	req.Header.Set("X-Big", strings.Repeat("b", 2<<20))
	if resp, err := servertest.Client.Do(req); err == nil {
		codes[fmt.Sprint(resp.StatusCode)]++
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("2 MiB header = %d, want 431", resp.StatusCode)
		}
		resp.Body.Close()
	} else {
		codes["conn"]++ // the server may close before the client finishes writing
	}
	// A 64 KiB Accept header of ranges to sort (Spring's negotiation is
	// parsed and sorted per request): the ID as text/plain, at once.
	req, _ = http.NewRequest("GET", p.URL("/api/segment/get/leaf-segment-test"), nil)
	req.Header.Set("Accept", strings.Repeat("text/x;q=0.5, application/*;q=0.1, ", 1900))
	t0 := time.Now()
	if resp, err := servertest.Client.Do(req); err != nil || resp.StatusCode != 200 ||
		resp.Header.Get("Content-Type") != "text/plain;charset=UTF-8" || time.Since(t0) > 2*time.Second {
		t.Errorf("64 KiB Accept = %v %v after %v, want 200 text/plain within 2 s", resp, err, time.Since(t0))
	} else {
		codes["200"]++
		resp.Body.Close()
	}
	// Wrong admin token: 401 (compared in constant time; not checked here).
	req, _ = http.NewRequest("GET", p.URL("/api/v1/admin/tags"), nil)
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", 8000))
	if resp, err := servertest.Client.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("admin with a wrong 8000-byte token = %v %v, want 401", resp, err)
	} else {
		codes["401"]++
		resp.Body.Close()
	}
	// Still serving.
	if status, body, err := p.Get(context.Background(), "/api/segment/get/leaf-segment-test"); err != nil || status != 200 {
		t.Errorf("after hostile input: %d %s %v, want 200", status, body, err)
	}
	report.add(t, row{
		Scenario: "5 hostile input", Size: fmt.Sprintf("%d malformed requests on every route, 64 KiB paths, 2 MiB header, 64 KiB Accept", len(tests)+3),
		Errors: codes, Worst: worst, Recovery: "n/a (never down)",
		Note: "all 4xx or Leaf's 500 -2 for unknown tags, except PATCH /metrics = 200 (promhttp answers any method, read-only), Leaf's 200 errorMsg for a malformed /decodeSnowflakeId and the ID for the long Accept; slowest: " + worstPath + "; router fuzzed by api.FuzzRouter",
	})
}

// TestSlowloris: 64 connections send a request header one byte every
// 100 ms and never finish. Meanwhile 4 ordinary clients must be served
// without delay, and the server must close the slow connections after its
// ReadHeaderTimeout (10 s).
func TestSlowloris(t *testing.T) {
	t.Parallel()
	p := start(t, t.TempDir())
	const slow = 64
	var closed atomic.Int64
	var closedAfter atomic.Int64 // ns, the latest
	var opened atomic.Int64      // slow connections that sent their first byte, or failed to dial
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range slow {
		wg.Go(func() {
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				opened.Add(1)
				t.Errorf("dial: %v", err)
				return
			}
			defer c.Close()
			readDone := make(chan struct{})
			go func() { // the server closing the connection ends the read
				defer close(readDone)
				_, _ = io.Copy(io.Discard, bufio.NewReader(c))
				closed.Add(1)
				for {
					old := closedAfter.Load()
					now := int64(time.Since(t0))
					if now <= old || closedAfter.CompareAndSwap(old, now) {
						return
					}
				}
			}()
			hdr := "GET /api/segment/get/leaf-segment-test HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("z", 1000)
			for i := 0; i < len(hdr); i++ {
				_, err := c.Write([]byte{hdr[i]})
				if i == 0 {
					opened.Add(1)
				}
				if err != nil {
					break
				}
				select {
				case <-readDone:
					return
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			<-readDone
		})
	}
	// The good clients start once every slow connection is open (has sent
	// its first byte), not after a fixed time.
	waittest.For(t, 10*time.Second, "the slow connections to open", func() bool { return opened.Load() == slow })
	tl := newTally(2*time.Second, 2*time.Second)
	var good []target
	for range 4 {
		good = append(good, target{srv: func() *servertest.Proc { return p }, path: "/api/segment/get/leaf-segment-test", tally: tl})
	}
	// Track the slowest successful answer too: a blocked server shows there.
	var slowest atomic.Int64
	lctx, lcancel := context.WithTimeout(context.Background(), 3*time.Second)
	var lw sync.WaitGroup
	lw.Go(func() {
		for lctx.Err() == nil {
			s := time.Now()
			status, _, err := p.Get(lctx, "/api/snowflake/get/x")
			if err == nil && status == 200 {
				if d := int64(time.Since(s)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
		}
	})
	drive(lctx, good)
	lcancel()
	lw.Wait()
	wg.Wait()
	r := check(t, tl, nil, "")
	if r.IDs == 0 {
		t.Errorf("no ID served while %d slow clients were connected", slow)
	}
	if n := closed.Load(); n != slow {
		t.Errorf("server closed %d of %d slow connections within 15 s, want all (ReadHeaderTimeout 10 s)", n, slow)
	}
	// A blocked server would show ~10 s here; 2 s leaves room for two busy CPUs.
	if sl := time.Duration(slowest.Load()); sl > 2*time.Second {
		t.Errorf("slowest ordinary answer during the slowloris %v, want under 2 s", sl)
	}
	r.Scenario = "5 hostile input"
	r.Size = fmt.Sprintf("slowloris: %d connections sending headers 1 byte/100 ms, 4+1 ordinary clients for 3 s", slow)
	r.Recovery = "n/a (never down)"
	r.Note = fmt.Sprintf("slowest ordinary answer %v; all %d slow connections closed by the server after %v (ReadHeaderTimeout 10 s)",
		time.Duration(slowest.Load()).Round(time.Millisecond), closed.Load(), time.Duration(closedAfter.Load()).Round(100*time.Millisecond))
	report.add(t, r)
}
