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
func wrkSection(t *testing.T, rep *report) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not installed: apt-get install wrk (Debian), then make bench")
	}
	pg := dbtest.Postgres(t)
	st, _ := pgSetup(t, pg)
	create(t, st, "bench", 1_000_000)
	leaf, bare := startLeaf(t, pg), startBare(t)
	d := scale(3 * time.Second)
	const rounds = 6
	lURL, bURL := leaf.URL("/api/segment/get/bench"), bare.URL("/api/segment/get/bench")
	runWrk(t, lURL, 16, scale(time.Second)) // warm up: first load, connections
	runWrk(t, bURL, 16, scale(time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "`wrk -t1 -cN` (Debian's wrk: one C thread, so the load generator leaves the servers most of the CPU) "+
		"against the real `leaf-server` (PostgreSQL store, tag step 10^6, metrics on) and the bare chi handler of the table above, "+
		"`GET /api/segment/get/bench`. Each cell is the median of %d runs of %v, alternating which server goes first. "+
		"Target (issue 13): leaf-go ≥ 0.95× the bare handler.\n\n", rounds, d)
	b.WriteString("| connections | leaf-go req/s | bare chi req/s | **ratio** | server CPU µs/req leaf-go / bare | errors leaf-go / bare |\n|---:|---:|---:|---:|---|---|\n")
	leafPID, barePID := pidOf(serverBin), pidOf(selfBin)
	for _, c := range []int{16, 64} {
		var lr, br []float64
		var le, be int64
		var lcpu, bcpu time.Duration
		var lreq, breq float64
		for round := range rounds {
			one := func(pid int, url string, into *[]float64, errs *int64, cpu *time.Duration, reqs *float64) {
				c0 := cpuTime(pid)
				r := runWrk(t, url, c, d)
				*cpu += cpuTime(pid) - c0
				*reqs += r.rps * d.Seconds()
				*into = append(*into, r.rps)
				*errs += r.errors
			}
			if round%2 == 0 {
				one(barePID, bURL, &br, &be, &bcpu, &breq)
				one(leafPID, lURL, &lr, &le, &lcpu, &lreq)
			} else {
				one(leafPID, lURL, &lr, &le, &lcpu, &lreq)
				one(barePID, bURL, &br, &be, &bcpu, &breq)
			}
		}
		l, bb := medianF(lr), medianF(br)
		perReq := func(cpu time.Duration, n float64) float64 {
			if n == 0 {
				return 0
			}
			return float64(cpu.Microseconds()) / n
		}
		fmt.Fprintf(&b, "| %d | %s | %s | **%s** | %.1f / %.1f | %d / %d |\n", c, num(l, 0), num(bb, 0), ratio(l, bb),
			perReq(lcpu, lreq), perReq(bcpu, breq), le, be)
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
