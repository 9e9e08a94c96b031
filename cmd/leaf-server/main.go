// Command leaf-server serves unique 64-bit IDs over HTTP, a drop-in
// replacement for Meituan's Leaf server. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/buildinfo"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// An unknown LEAF_* variable is refused before anything starts (defaults.go).
	err := checkEnviron(os.Environ())
	if err == nil {
		err = run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	}
	stop()
	if err != nil && !errors.Is(err, errHelp) {
		fmt.Fprintln(os.Stderr, "leaf-server:", err)
		os.Exit(1)
	}
}

// run starts the server and blocks until ctx is cancelled (SIGINT/SIGTERM),
// then drains in-flight requests for at most ShutdownTimeout. After the
// drain it releases the snowflake worker ID; a failed release is returned
// too (joined with any other error).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	l, err := parseConfig(args, getenv, func(s string) { _, _ = fmt.Fprint(stderr, s) })
	if err != nil {
		return err
	}
	if l.version {
		_, _ = fmt.Fprintln(stdout, "leaf-server", buildinfo.Read())
		return nil
	}
	if l.print {
		l.printConfig(stdout)
		return nil
	}
	cfg := l.Config
	log := newLogger(cfg, stderr)
	build, started := buildinfo.Read(), time.Now()
	log.Info("leaf-server starting", "version", build.Version, "commit", build.Commit, "modified", build.Modified,
		"go", build.GoVersion, "platform", build.Platform)
	// A heap goal of at least 32 MiB: the collector otherwise runs every
	// few hundred requests (gcfloor.go). GOGC in the environment turns it off.
	defer gcFloor(gcHeapFloor, getenv)()
	for _, w := range l.warnings {
		log.Warn("configuration", "warning", w)
	}
	if l.configFile != "" {
		log.Info("read Leaf configuration", "file", l.configFile)
	}

	// Bind first: a taken port fails the start before any migration runs or
	// any worker ID is claimed. Connections queue until Serve.
	ln, err := listen(cfg.Listen, "listen", l.sources["listen"])
	if err != nil {
		return err
	}
	// srv.Shutdown closes ln; this Close covers the returns before Serve
	// and its "already closed" error says nothing.
	defer func() { _ = ln.Close() }()
	if cfg.PprofListen != "" {
		pln, err := listen(cfg.PprofListen, "pprof-listen", l.sources["pprof-listen"])
		if err != nil {
			return err
		}
		psrv := &http.Server{Handler: pprofHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = psrv.Serve(pln) }()
		defer func() { _ = psrv.Close() }() // pprof is a debugging aid: nothing to flush
		log.Info("pprof listening", "addr", pln.Addr().String())
	}

	// Lock the data dir before anything writes to it (the SQLite file, the
	// high-water files): a second server on the same dir exits here. The
	// deferred release runs after everything that writes the dir has closed.
	if cfg.writesDataDir() {
		release, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, release()) }()
		log.Info("locked data dir", "dir", cfg.DataDir, "pid", os.Getpid())
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	deps := api.Deps{Logger: log, Registerer: reg, AdminToken: cfg.AdminToken, WaitTimeout: cfg.WaitTimeout,
		TagMetrics: cfg.tagMetrics(), Build: build, Started: started}
	// The store holds leaf_alloc for segment mode and the worker leases of
	// --worker-id-source sql.
	var st store.Store
	var startStore startFunc // not nil: st did not answer at start and is not open yet
	if cfg.SegmentEnabled || (cfg.SnowflakeEnabled && cfg.WorkerIDSource == "sql") {
		st, startStore, err = openSegmentStore(ctx, cfg, log)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, st.Close()) }()
	}
	var segGen *segment.Generator
	if cfg.SegmentEnabled {
		gen, stopRetry, err := startSegment(ctx, cfg, st, startStore, log, &deps)
		if err != nil {
			return err
		}
		segGen = gen
		defer func() { stopRetry(); err = errors.Join(err, closeGroups(deps.Groups), gen.Close()) }()
	}

	if cfg.SnowflakeEnabled {
		sup, startErr := startSnowflake(ctx, cfg, st, log)
		if startErr != nil {
			return fmt.Errorf("start snowflake mode: %w", startErr)
		}
		// err is run's result: a failed release of the worker ID is reported.
		defer func() { err = errors.Join(err, sup.Close()) }()
		deps.SnowflakeSlot = sup.Slot()
		// A lease source's range on /metrics: IDs free, peers' clock offset.
		if rw := watchWorkerRange(ctx, cfg, sup, log); rw != nil {
			deps.WorkerRange = rw.get
			defer rw.stop()
		}
	}

	srv := &http.Server{
		Handler:           api.NewHandler(deps),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String(), "admin_api", cfg.AdminToken != "")

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if segGen != nil {
		returnTails(cfg, segGen, deps.Groups, log)
	}
	log.Info("stopped")
	return nil
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// pprofHandler serves net/http/pprof's profiles under /debug/pprof/ (index,
// profile, symbol, trace and the named profiles such as heap). Not cmdline:
// the command line can hold --admin-token or a DSN password, and anyone who
// reaches the pprof listener could read them there.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
