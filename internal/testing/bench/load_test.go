package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// loadResult is the part of `leafctl bench --json` the harness reads.
type loadResult struct {
	Requests      int64             `json:"requests"`
	OK            int64             `json:"ok"`
	Failed        int64             `json:"failed"`
	RequestsPerS  float64           `json:"requests_per_second"`
	IDs           int64             `json:"ids"`
	IDsPerS       float64           `json:"ids_per_second"`
	Duplicates    int64             `json:"duplicates"`
	Errors        map[string]int64  `json:"errors"`
	ErrorExamples map[string]string `json:"error_examples"`
	Latency       struct {
		P50  time.Duration `json:"p50"`
		P90  time.Duration `json:"p90"`
		P99  time.Duration `json:"p99"`
		P999 time.Duration `json:"p999"`
		Max  time.Duration `json:"max"`
	} `json:"latency"`
}

// leafctl runs `leafctl bench --json` against server (a base URL) with args
// and returns what it measured. A run that saw a duplicate (exit 3) is
// returned with Duplicates set; the caller reports it.
func leafctl(ctx context.Context, server string, args ...string) (loadResult, error) {
	args = append([]string{"bench", "--json", "--server", server, "--timeout", "10s"}, args...)
	cmd := exec.CommandContext(ctx, leafctlBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res loadResult
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		return res, fmt.Errorf("leafctl %v: %v (%v)\n%s", args, err, jerr, stderr.String())
	}
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || (exit.ExitCode() != 3 && exit.ExitCode() != 1)) {
		return res, fmt.Errorf("leafctl %v: %v\n%s", args, err, stderr.String())
	}
	return res, nil
}

// mustLoad is leafctl that fails the test on a harness error.
func mustLoad(t *testing.T, server string, args ...string) loadResult {
	t.Helper()
	res, err := leafctl(t.Context(), server, args...)
	if err != nil {
		t.Fatal(err)
	}
	if res.Duplicates > 0 {
		t.Errorf("leafctl %v: %d DUPLICATE IDs", args, res.Duplicates)
	}
	return res
}

// secs formats d as a leafctl --duration.
func secs(d time.Duration) string { return d.String() }

// pgSetup opens a fresh PostgreSQL database (migrated) and returns its DSN,
// the store and an admin connection, all closed when the test ends.
func pgSetup(t *testing.T, dsnStr string) (store.Store, *pgx.Conn) {
	t.Helper()
	ctx := t.Context()
	st, err := dsn.Open(ctx, dsnStr, true)
	if err != nil {
		t.Fatalf("open %s: %v", dsnStr, err)
	}
	t.Cleanup(func() { st.Close() })
	conn, err := pgx.Connect(ctx, dsnStr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return st, conn
}

// installUpdateLog adds a trigger that logs every UPDATE of leaf_alloc, so
// that the harness counts the database writes of any number of servers.
func installUpdateLog(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for _, q := range []string{
		`CREATE TABLE bench_updates (biz_tag text NOT NULL, old_max bigint NOT NULL, new_max bigint NOT NULL)`,
		`CREATE FUNCTION bench_log() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN INSERT INTO bench_updates VALUES (NEW.biz_tag, OLD.max_id, NEW.max_id); RETURN NEW; END $$`,
		`CREATE TRIGGER bench_log AFTER UPDATE ON leaf_alloc FOR EACH ROW EXECUTE FUNCTION bench_log()`,
	} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("install update log: %v", err)
		}
	}
}

// updates returns the number of UPDATEs of tag's row so far and the size of
// the last one (the step in force).
func updates(t *testing.T, conn *pgx.Conn, tag string) (n, lastStep int64) {
	t.Helper()
	err := conn.QueryRow(t.Context(), `SELECT count(*), COALESCE((SELECT new_max - old_max FROM bench_updates
		WHERE biz_tag = $1 ORDER BY new_max DESC LIMIT 1), 0) FROM bench_updates WHERE biz_tag = $1`, tag).Scan(&n, &lastStep)
	if err != nil {
		t.Fatal(err)
	}
	return n, lastStep
}

func create(t *testing.T, st store.Store, tag string, step int64) {
	t.Helper()
	if err := st.Create(t.Context(), store.Row{BizTag: tag, MaxID: 1, Step: step}); err != nil {
		t.Fatalf("create %s: %v", tag, err)
	}
}

// startLeaf runs the real leaf-server in segment mode on dsnStr.
func startLeaf(t *testing.T, dsnStr string) *servertest.Proc {
	t.Helper()
	dir := t.TempDir()
	return servertest.Start(t, serverBin, servertest.Options{Dir: dir, Args: []string{
		"--segment-dsn", dsnStr, "--migrate=false", "--snowflake=false", "--demo-tag=false",
		"--data-dir", dir + "/data",
	}})
}

// startBare runs the bare chi baseline (this test binary, see serveBare).
func startBare(t *testing.T) *servertest.Proc {
	t.Helper()
	return servertest.Start(t, selfBin, servertest.Options{Dir: t.TempDir(), Env: []string{bareEnv + "=1"}})
}

// viaHost returns dsnStr (a postgres:// URL) with its host:port replaced.
func viaHost(t *testing.T, dsnStr, hostport string) (string, string) {
	t.Helper()
	u, err := url.Parse(dsnStr)
	if err != nil {
		t.Fatal(err)
	}
	upstream := u.Host
	if u.Port() == "" {
		upstream += ":5432"
	}
	u.Host = hostport
	return u.String(), upstream
}

// pgHost returns the host:port of a postgres:// DSN.
func pgHost(t *testing.T, dsnStr string) string {
	_, up := viaHost(t, dsnStr, "x")
	return up
}

// errSummary formats the failures of a run: "none" or "500: 12 (Result{id=-3…})".
func errSummary(r loadResult) string {
	if r.Failed == 0 {
		return "none"
	}
	var parts []string
	for k, n := range r.Errors {
		ex := r.ErrorExamples[k]
		if i := strings.Index(ex, "Result{"); i >= 0 {
			ex = ex[i:]
			if j := strings.Index(ex, "}"); j >= 0 {
				ex = ex[:j+1]
			}
		}
		if len(ex) > 60 {
			ex = ex[:60] + "…"
		}
		parts = append(parts, fmt.Sprintf("%s: %d (%s)", k, n, ex))
	}
	return strings.Join(parts, "; ")
}

// code3 counts the -3 answers of a run: every 500 when its first example is
// a -3 (the single-ID route of an existing tag can only fail with -3 or -1).
func code3(r loadResult) int64 {
	if strings.Contains(r.ErrorExamples["500"], "id=-3") {
		return r.Errors["500"]
	}
	return 0
}

func itoa(n int) string { return strconv.Itoa(n) }

// openStore opens a migrated store, closed when the test ends.
func openStore(t *testing.T, dsnStr string) (store.Store, error) {
	st, err := dsn.Open(t.Context(), dsnStr, true)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { st.Close() })
	return st, nil
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
