package bench

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leaf-go/leaf/internal/servertest"
)

var (
	harness = flag.Bool("harness", false, "run the benchmark harness (otherwise TestHarness skips)")
	outPath = flag.String("out", "", "BENCHMARKS.md to rewrite between the harness markers (empty: print only)")
	quick   = flag.Bool("quick", false, "short runs: check the harness works, not figures to publish")
	only    = flag.String("only", "", "comma-separated sections to run (segment,http,wrk,alternatives,snowflake,slowdb,updates,servers,memory,tags,refresh,metrics,metricsscale); empty: all")
)

// bareEnv makes the test binary serve the bare chi baseline instead of
// running tests (see serveBare).
const bareEnv = "LEAF_BENCH_BARE"

// Binaries built once by TestMain when -harness is set.
var (
	serverBin  string // leaf-server
	leafctlBin string // leafctl
	selfBin    string // this test package built with leaf-server's PGO profile, run as the bare chi server
)

func TestMain(m *testing.M) {
	if os.Getenv(bareEnv) == "1" {
		os.Exit(serveBare(os.Args[1:]))
	}
	flag.Parse()
	if !*harness {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "leaf-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		start := time.Now()
		if serverBin, err = servertest.Build(dir, false); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		leafctlBin = filepath.Join(dir, "leafctl")
		cmd := exec.Command("go", "build", "-o", leafctlBin, "github.com/leaf-go/leaf/cmd/leafctl")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build leafctl:", err)
			return 1
		}
		// The bare baseline is this test package, rebuilt with leaf-server's
		// profile (cmd/leaf-server/default.pgo) so that both servers of the
		// HTTP table are built the same way: net/http and chi get the same
		// profile-guided inlining in both.
		selfBin = filepath.Join(dir, "bench-bare")
		cmd = exec.Command("go", "test", "-c", "-pgo=../../../cmd/leaf-server/default.pgo", "-o", selfBin, ".")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build the bare baseline:", err)
			return 1
		}
		fmt.Printf("built leaf-server, leafctl and the bare baseline in %v\n", time.Since(start).Round(time.Second))
		return m.Run()
	}()
	os.Exit(code)
}

// serveBare is the baseline of the HTTP benchmark: a chi router whose one
// handler returns an atomic counter as text, in a process of its own, served
// by an http.Server set up as leaf-server's (same timeouts, keep-alive). It
// takes leaf-server's --listen flag (the last one wins) and logs the same
// "listening" line, so that servertest starts it like leaf-server.
func serveBare(args []string) int {
	listen := "127.0.0.1:0"
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--listen" || args[i] == "-listen" {
			listen = args[i+1]
		}
	}
	var n atomic.Int64
	r := chi.NewRouter()
	r.HandleFunc("/api/segment/get/{key}", func(w http.ResponseWriter, r *http.Request) {
		_ = chi.URLParam(r, "key")
		w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
		_, _ = w.Write(strconv.AppendInt(nil, n.Add(1), 10))
	})
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Info("listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}
