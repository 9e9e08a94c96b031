package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
)

// TestLeaseReleaseErrorReported: when the SQL lease cannot be released at
// shutdown (here its table is gone), leaf-server says so and exits with
// status 1 instead of dropping the error.
func TestLeaseReleaseErrorReported(t *testing.T) {
	t.Parallel()
	d := dbtest.Postgres(t)
	p := startServer(t, t.TempDir(), "--segment=false", "--snowflake", "--worker-id-source", "sql", "--segment-dsn", d)
	p.WaitReady(t, time.Minute) // a fresh row has no history: held back TTL + margin
	if code, body, err := p.get(t.Context(), "/api/snowflake/get/x"); err != nil || code != 200 {
		t.Fatalf("snowflake ID = %d %q, %v", code, body, err)
	}
	if _, err := rawDB(t, "postgres", d).ExecContext(t.Context(), "DROP TABLE leaf_worker_lease"); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("leaf-server did not exit within 20 s of SIGTERM")
	}
	if code := p.ExitCode(); code != 1 || !strings.Contains(p.logs(), "release worker ID") {
		t.Errorf("exit status %d after a failed lease release, want 1 and the release error\n%s", code, p.logs())
	}
}
