package bench

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
)

// wrkResult is what one wrk run printed: requests per second and the count of non-2xx or
// socket errors.
type wrkResult struct {
	rps    float64
	errors int64
}

var (
	wrkRPS    = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkNon2xx = regexp.MustCompile(`Non-2xx or 3xx responses:\s+([0-9]+)`)
	wrkSocket = regexp.MustCompile(`Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
)

// runWrk runs wrk with one thread (so that the server keeps most of the CPU) and conns
// connections against url for d.
func runWrk(t *testing.T, url string, conns int, d time.Duration) wrkResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "wrk", "-t1", "-c"+strconv.Itoa(conns),
		"-d"+strconv.Itoa(int(max(d/time.Second, 1)))+"s", url).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		t.Fatalf("wrk printed no Requests/sec:\n%s", out)
	}
	r := wrkResult{}
	r.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		r.errors += n
	}
	if m := wrkSocket.FindSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(string(s), 10, 64)
			r.errors += n
		}
	}
	return r
}

// wrkSection: requests/s of GET /api/segment/get/{tag} on the real leaf-server against the
// bare chi handler, driven by wrk (a C load generator with one thread, so the load tool costs
// far less CPU than leafctl bench does). Target (issue 13): ≥ 0.95× at 16 and 64 connections.
//
// The machine has two cores and is shared, so one run of either server says little: the
// servers take turns (A B, then B A, …) for several rounds, each round's ratio is taken
// between its two back-to-back runs, and the table shows the median of those ratios next to
// the median rates. The server CPU per request (from /proc) is a second figure, less
// sensitive to how much CPU the other jobs left over.
func wrkSection(t *testing.T, rep *report) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not installed: apt-get install wrk (Debian), then make bench")
	}
	pg := dbtest.Postgres(t)
	st, _ := pgSetup(t, pg)
	create(t, st, "bench", 1_000_000)
	leaf, bare := startLeaf(t, pg), startBare(t)
	d := scale(3 * time.Second)
	rounds := 8
	if *quick {
		rounds = 2
	}
	lURL, bURL := leaf.URL("/api/segment/get/bench"), bare.URL("/api/segment/get/bench")
	runWrk(t, lURL, 16, scale(time.Second)) // warm up: first load, connections, GC pacing
	runWrk(t, bURL, 16, scale(time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "`wrk -t1 -cN` (Debian's wrk: one C thread, not pinned to a core, so the load generator leaves the servers most of the CPU) "+
		"against the real `leaf-server` (PostgreSQL store, tag step 10^6, metrics on, default flags) and the bare chi handler of the table above "+
		"(a chi router whose one handler writes a counter, same `http.Server` settings, built with the same PGO profile), "+
		"`GET /api/segment/get/bench`. %d rounds of %v per server and connection count; in each round the two servers run back to back, "+
		"alternating which goes first. **ratio** is the median over the rounds of leaf-go's rate ÷ the bare handler's rate in the same round; "+
		"the rates are the medians of each server's runs; CPU is the server process's user + system time per request over all its runs "+
		"(bare ÷ leaf-go is the CPU ratio). Target (issue 13): leaf-go ≥ 0.95× the bare handler.\n\n", rounds, d)
	b.WriteString("| connections | leaf-go req/s | bare chi req/s | **ratio** (median of rounds) | ratios min–max | server CPU µs/req leaf-go / bare | CPU ratio | errors leaf-go / bare |\n|---:|---:|---:|---:|---|---|---:|---|\n")
	leafPID, barePID := pidOf(serverBin), pidOf(selfBin)
	for _, c := range []int{16, 64} {
		var lr, br, rr []float64
		var le, be int64
		var lcpu, bcpu time.Duration
		var lreq, breq float64
		for round := range rounds {
			one := func(pid int, url string, into *[]float64, errs *int64, cpu *time.Duration, reqs *float64) float64 {
				c0 := cpuTime(pid)
				r := runWrk(t, url, c, d)
				*cpu += cpuTime(pid) - c0
				*reqs += r.rps * d.Seconds()
				*into = append(*into, r.rps)
				*errs += r.errors
				return r.rps
			}
			var l, bb float64
			if round%2 == 0 {
				bb = one(barePID, bURL, &br, &be, &bcpu, &breq)
				l = one(leafPID, lURL, &lr, &le, &lcpu, &lreq)
			} else {
				l = one(leafPID, lURL, &lr, &le, &lcpu, &lreq)
				bb = one(barePID, bURL, &br, &be, &bcpu, &breq)
			}
			if bb > 0 {
				rr = append(rr, l/bb)
			}
		}
		perReq := func(cpu time.Duration, n float64) float64 {
			if n == 0 {
				return 0
			}
			return float64(cpu.Microseconds()) / n
		}
		if len(rr) == 0 {
			rr = []float64{0} // no run of the bare handler answered
		}
		lu, bu := perReq(lcpu, lreq), perReq(bcpu, breq)
		fmt.Fprintf(&b, "| %d | %s | %s | **%.2f×** | %.2f–%.2f | %.1f / %.1f | %s | %d / %d |\n", c, num(medianF(lr), 0), num(medianF(br), 0),
			medianF(rr), slices.Min(rr), slices.Max(rr), lu, bu, ratio(bu, lu), le, be)
	}
	rep.add("HTTP single ID under wrk: leaf-server vs a bare chi handler", b.String())
}

func medianF(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
