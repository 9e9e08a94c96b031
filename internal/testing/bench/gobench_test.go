package bench

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Where goBench runs `go test`: the repository root for the library's own
// packages (./segment/, ./api/, and the pure snowflake benchmarks), the root
// of this test module (internal/testing) for packages whose baselines need a
// dependency the library does not carry. From testingDir the library's
// packages are named by import path (github.com/leaf-go/leaf/snowflake).
const (
	rootDir    = "../../.."
	testingDir = ".."
)

// goBench runs `go test -bench` on pkgs (paths relative to dir, or import
// paths) in dir count times, each a separate pass over all the benchmarks (-count 1), so
// that a burst of load from elsewhere on the machine hits one sample of each
// benchmark rather than every sample of one. extra are more go test flags
// (e.g. -pgo=file). It returns, per benchmark name without the -GOMAXPROCS
// suffix, the median of every reported unit (ns/op, B/op, allocs/op, custom
// metrics).
func goBench(t *testing.T, dir string, pkgs []string, re, benchtime string, count int, extra ...string) map[string]map[string]float64 {
	t.Helper()
	start := time.Now()
	var all strings.Builder
	for range count {
		var out []byte
		var err error
		// One retry: a build can fail while files are being edited in a
		// shared working tree; a real failure fails twice.
		for try := range 2 {
			args := append([]string{"test", "-run", "^$", "-bench", re, "-benchmem",
				"-benchtime", benchtime, "-count", "1"}, extra...)
			cmd := exec.Command("go", append(args, pkgs...)...)
			cmd.Dir = dir
			if out, err = cmd.CombinedOutput(); err == nil {
				break
			}
			if try == 0 {
				fmt.Printf("go test -bench %s %s failed, retrying in 10 s: %v\n", re, pkgs, err)
				time.Sleep(10 * time.Second)
			}
		}
		if err != nil {
			t.Fatalf("go test -bench %s %s: %v\n%s", re, pkgs, err, out)
		}
		all.Write(out)
	}
	fmt.Printf("go test -bench %q %s %s (%d passes): %v\n", re, strings.Join(extra, " "), strings.Join(pkgs, " "), count, time.Since(start).Round(time.Second))
	return parseBench(all.String())
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parseBench reads `go test -bench` output: lines "BenchmarkX-2  N  v unit
// v unit …".
func parseBench(out string) map[string]map[string]float64 {
	all := map[string]map[string][]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		if all[name] == nil {
			all[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			all[name][f[i+1]] = append(all[name][f[i+1]], v)
		}
	}
	res := map[string]map[string]float64{}
	for name, units := range all {
		res[name] = map[string]float64{}
		for u, vs := range units {
			slices.Sort(vs)
			res[name][u] = vs[len(vs)/2]
		}
	}
	return res
}

// segmentSection: Tag.Get (the per-tag handle, the headline) and Get
// against a bare atomic add and against a map lookup plus atomic add, serial
// and with GOMAXPROCS goroutines; once as `go test` builds the package and
// once with profile-guided optimization from a CPU profile of the same
// benchmarks, as a program that calls Tag.Get in its hot loop would be built
// with its own default.pgo.
func segmentSection(t *testing.T, rep *report, benchtime string, count int) {
	const re = "^Benchmark(AtomicAdd|MapAtomicAdd|Get|TagGet)$"
	profile := filepath.Join(t.TempDir(), "segment.pprof")
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^Benchmark(Get|TagGet)$", "-benchtime", benchtime,
		"-count", "1", "-cpuprofile", profile, "-o", filepath.Join(t.TempDir(), "segment.test"), "./segment/")
	cmd.Dir = rootDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("profile the segment benchmarks: %v\n%s", err, out)
	}
	plain := goBench(t, rootDir, []string{"./segment/"}, re, benchtime, count)
	pgo := goBench(t, rootDir, []string{"./segment/"}, re, benchtime, count, "-pgo="+profile)
	var b strings.Builder
	fmt.Fprintf(&b, "`go test -bench '%s' -benchtime %s ./segment/` run %d times, median of the runs; then the same with `-pgo=<profile>`, "+
		"a CPU profile of BenchmarkGet and BenchmarkTagGet taken first in this run. "+
		"TagGet is `Tag.Get` on a handle from `Generator.Tag` (the tag resolved once); Get is the full in-process call "+
		"`Generator.Get(ctx, tag)`, which looks the tag up in the cache every time; both on a SQLite store, step 2^31−1 so no load happens. "+
		"The baselines are a bare `atomic.Int64.Add` and a copy-on-write `map[string]*counter` lookup plus the add, in the same binary. "+
		"Ratio = baseline ns/op ÷ ns/op, i.e. throughput as a share of the baseline's (target ≥ 0.80 against the atomic add). "+
		"The CPU-time columns divide the process's CPU time (getrusage, all threads) during the loop by the iterations: "+
		"unlike ns/op they do not count time spent waiting for a core, so on a shared machine their ratio moves less.\n\n"+
		"Why two builds: Go inlines a function only under an inline budget (80); `Tag.Get`'s fast path fits, but its call to the slow path "+
		"costs the rest, so a plain build pays one function call per ID. Under PGO the compiler inlines hot calls up to a budget of 2000, "+
		"so a program built with a profile (Go's default `-pgo=auto` picks up `default.pgo` in the main package; leaf-server ships one, "+
		"see `make pgo`) gets the fast path inlined into its loop.\n\n", re, benchtime, count)
	b.WriteString("| goroutines | build | TagGet ns/op | Get ns/op | allocs/op (TagGet, Get) | atomic add ns/op | **TagGet ÷ atomic** | Get ÷ atomic | CPU ns/op TagGet, Get, atomic | TagGet ÷ atomic, CPU time | map+atomic ns/op | Get ÷ map+atomic |\n" +
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, mode := range []string{"serial", "parallel"} {
		for _, build := range []struct {
			label string
			r     map[string]map[string]float64
		}{{"plain", plain}, {"PGO", pgo}} {
			r := build.r
			h, g, a, m := r["TagGet/"+mode], r["Get/"+mode], r["AtomicAdd/"+mode], r["MapAtomicAdd/"+mode]
			label := "1"
			if mode == "parallel" {
				label = fmt.Sprintf("GOMAXPROCS (%d)", gomaxprocs())
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.0f, %.0f | %.2f | **%s** | %s | %.2f, %.2f, %.2f | %s | %.2f | %s |\n", label, build.label,
				h["ns/op"], g["ns/op"], h["allocs/op"], g["allocs/op"], a["ns/op"],
				ratio(a["ns/op"], h["ns/op"]), ratio(a["ns/op"], g["ns/op"]),
				h["cpu-ns/op"], g["cpu-ns/op"], a["cpu-ns/op"], ratio(a["cpu-ns/op"], h["cpu-ns/op"]),
				m["ns/op"], ratio(m["ns/op"], g["ns/op"]))
		}
	}
	rep.add("Segment Get in-process vs a bare atomic add", b.String())
}

// snowflakeSection: Next against the layout's cap, bwmarrin/snowflake and
// sony/sonyflake (v1, and v2 both on its default layout and set to 41/10/12).
// leaf-go's benchmarks are in snowflake/bench_test.go, the baselines in
// internal/testing/snowflake; one `go test` runs both packages, one after
// the other, in each pass.
func snowflakeSection(t *testing.T, rep *report, benchtime string, count int) {
	re := "^Benchmark(Next|NextZeroStart|NextUncapped|NextParallel|Bwmarrin|BwmarrinParallel|Sonyflake|SonyflakeV2|SonyflakeV2Layout41|SonyflakeV2Layout41Parallel|AtomicAdd)$"
	pkgs := []string{"github.com/leaf-go/leaf/snowflake", "./snowflake/"}
	r := goBench(t, testingDir, pkgs, re, benchtime, count)
	// Next starts each millisecond at a random sequence in [0, 100), so its
	// cap is 4096 minus the mean start, 49.5.
	const capRandom, capZero = 4096 - 49.5, 4096.0
	var b strings.Builder
	fmt.Fprintf(&b, "`go test -bench '%s' -benchtime %s %s` in internal/testing run %d times, median of the runs. "+
		"The default layout (41/10/12) caps one worker at 4096 IDs per millisecond; with Leaf's random start of the sequence in [0, 100) "+
		"the cap is 4046.5/ms. Target: Next ≥ 0.97 of the cap.\n\n", re, benchtime, strings.Join(pkgs, " "), count)
	b.WriteString("| generator | ns/op | allocs/op | IDs/ms | **÷ cap** | cap used |\n|---|---:|---:|---:|---:|---|\n")
	row := func(name, label string, capPerMs float64, capLabel string) {
		v := r[name]
		fmt.Fprintf(&b, "| %s | %.1f | %.0f | %s | **%s** | %s |\n", label, v["ns/op"], v["allocs/op"], num(v["IDs/ms"], 0), ratio(v["IDs/ms"], capPerMs), capLabel)
	}
	row("Next", "leaf-go `Next` (random start, Leaf default)", capRandom, "4046.5/ms")
	row("NextZeroStart", "leaf-go `Next`, sequence from 0", capZero, "4096/ms")
	row("NextParallel", "leaf-go `Next`, GOMAXPROCS goroutines", capRandom, "4046.5/ms")
	row("Bwmarrin", "github.com/bwmarrin/snowflake v0.3.0", capZero, "4096/ms")
	row("BwmarrinParallel", "bwmarrin, GOMAXPROCS goroutines", capZero, "4096/ms")
	row("Sonyflake", "github.com/sony/sonyflake v1.2.0 (10 ms × 8-bit sequence)", 25.6, "25.6/ms (its own layout)")
	row("SonyflakeV2", "github.com/sony/sonyflake/v2 v2.2.0, its default (10 ms × 8-bit sequence)", 25.6, "25.6/ms (its own layout)")
	row("SonyflakeV2Layout41", "sonyflake v2 set to 41/10/12 (1 ms units), sequence from 0", capZero, "4096/ms")
	row("SonyflakeV2Layout41Parallel", "sonyflake v2 41/10/12, GOMAXPROCS goroutines", capZero, "4096/ms")
	next, zero, bw, sf := r["Next"]["IDs/ms"], r["NextZeroStart"]["IDs/ms"], r["Bwmarrin"]["IDs/ms"], r["Sonyflake"]["IDs/ms"]
	sf2 := r["SonyflakeV2Layout41"]["IDs/ms"]
	fmt.Fprintf(&b, "\nleaf-go `Next` ÷ bwmarrin: **%s** (sequence from 0 on both: %s); ÷ sonyflake: %s; "+
		"sequence from 0 ÷ sonyflake v2 on the same 41/10/12 layout: %s.\n", ratio(next, bw), ratio(zero, bw), ratio(next, sf), ratio(zero, sf2))
	un, at := r["NextUncapped"]["ns/op"], r["AtomicAdd"]["ns/op"]
	fmt.Fprintf(&b, "Fast path without the cap (22 sequence bits, `NextUncapped`): %.1f ns/op against %.1f ns/op for a bare atomic add (%s); "+
		"at 244 ns per ID the cap, not the code, bounds a generator that costs %.0f ns.\n", un, at, ratio(at, un), un)
	rep.add("Snowflake Next vs the 4096/ms cap, bwmarrin/snowflake and sony/sonyflake", b.String())
}

// metricsSection re-measures the metrics middleware (api/metrics_bench_test.go).
func metricsSection(t *testing.T, rep *report, benchtime string) {
	r := goBench(t, rootDir, []string{"./api/"}, "^BenchmarkMetricsOverhead$", benchtime, 1)
	var b strings.Builder
	fmt.Fprintf(&b, "`go test -bench '^BenchmarkMetricsOverhead$' -benchtime %s ./api/`: alternating batches against a handler without and with metrics "+
		"(one generator, SQLite, step 10^6), median ns per request of each.\n\n", benchtime)
	b.WriteString("| case | bare ns/req | metrics ns/req | ratio |\n|---|---:|---:|---:|\n")
	for _, c := range []struct{ name, label string }{
		{"loopback", "loopback HTTP, `/api/segment/get/bench`"},
		{"in-process", "in-process `ServeHTTP`, `/api/segment/get/bench`"},
		{"in-process-healthz", "in-process `ServeHTTP`, `/healthz` (does nothing)"},
	} {
		v := r["MetricsOverhead/"+c.name]
		fmt.Fprintf(&b, "| %s | %s | %s | **%.3f** |\n", c.label, num(v["bare-ns/req"], 0), num(v["metrics-ns/req"], 0), v["ratio"])
	}
	rep.add("Metrics middleware overhead", b.String())
}
