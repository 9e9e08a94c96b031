package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
	"github.com/leaf-go/leaf/store/mysql"
	"github.com/leaf-go/leaf/store/postgres"
	"github.com/leaf-go/leaf/store/sqlite"
)

// Every store the server can run on implements the whole [store.Store]; a
// method added to the interface and forgotten by one of them does not
// compile. Before issue 24 groups and retry counts were optional
// interfaces found by type assertion, and a wrapper that forgot one
// silently switched off the grouped-name refusal and leaf_store_retries_total.
// A database not reachable at start needs no wrapper either: the server
// serves the dialect's store not yet started (dsn.New).
var (
	_ store.Store = (*postgres.Store)(nil)
	_ store.Store = (*mysql.Store)(nil)
	_ store.Store = (*sqlite.Store)(nil)
)

// dialects are the databases of the store-stack tests.
var dialects = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{"sqlite", dbtest.SQLite},
	{"postgres", dbtest.Postgres},
	{"mysql", dbtest.MySQL},
}

// TestGroupedNamesRefusedByTheServer runs the real leaf-server on each
// dialect and checks that the admin API refuses what would restart a
// grouped tag's sequence: deleting the current period's row (the next
// request would create it again from 1, and a server with a fresh data dir
// would repeat the IDs) and creating plain tags named like the grouped tag
// or one of its period rows. The api package's own tests hand the handler
// a raw store; this one failed while a store wrapper of leaf-server hid the
// group methods.
func TestGroupedNamesRefusedByTheServer(t *testing.T) {
	servertest.SkipShort(t)
	for _, db := range dialects {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			p := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(),
				Args: []string{"--snowflake=false", "--admin-token", "secret", "--segment-dsn", db.dsn(t)}})
			checkGroupedNames(t, func(method, path, body string) (int, string) {
				t.Helper()
				return adminCall(t, p.URL(path), method, body)
			})
		})
	}
}

// TestGroupedNamesRefusedAfterLateStart is the same check on the store
// stack of a server whose database did not answer at start: the store of
// dsn.New, not started, wired by startSegment as run wires it, whose
// background retry then opens it. It also checks that the store refuses
// calls before (store.ErrNotOpen), and that leaf_store_retries_total
// reaches /metrics (the retry counts of the SQL stores).
func TestGroupedNamesRefusedAfterLateStart(t *testing.T) {
	servertest.SkipShort(t)
	for _, db := range dialects[1:] { // SQLite never starts late (a local file)
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			cfg := DefaultConfig()
			cfg.SegmentDSN, cfg.DataDir, cfg.DemoTag = db.dsn(t), t.TempDir(), false
			log := slog.New(slog.DiscardHandler)
			st, start, err := dsn.New(cfg.DSN())
			if err != nil {
				t.Fatalf("dsn.New: %v", err)
			}
			t.Cleanup(func() { _ = st.Close() })
			if err := st.Ping(ctx); !errors.Is(err, store.ErrNotOpen) {
				t.Fatalf("Ping before the start = %v, want store.ErrNotOpen", err)
			}
			deps := api.Deps{Logger: log, AdminToken: "secret", WaitTimeout: 5 * time.Second,
				Registerer: prometheus.NewRegistry()}
			gen, stop, err := startSegment(ctx, cfg, st, start, log, &deps)
			if err != nil {
				t.Fatalf("startSegment: %v", err)
			}
			t.Cleanup(func() { stop(); _ = closeGroups(deps.Groups); _ = gen.Close() })
			waitOpen(t, st)
			srv := httptest.NewServer(api.NewHandler(deps))
			t.Cleanup(srv.Close)
			checkGroupedNames(t, func(method, path, body string) (int, string) {
				t.Helper()
				return adminCall(t, srv.URL+path, method, body)
			})
			if code, body := adminCall(t, srv.URL+"/metrics", "GET", ""); code != 200 || !strings.Contains(body, `leaf_store_retries_total{cause="deadlock"}`) {
				t.Errorf("GET /metrics = %d, want leaf_store_retries_total by cause; body has %d bytes", code, len(body))
			}
		})
	}
}

// waitOpen waits, at most 30 s, until st (not open at start) answers.
func waitOpen(t *testing.T, st store.Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := st.Ping(t.Context())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store not open after 30 s: %v", err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// adminCall sends one request with the admin token "secret".
func adminCall(t *testing.T, url, method, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkGroupedNames declares the grouped tag "order", takes 3 IDs, and
// checks the refusals of names that collide with it, then that the
// sequence went on.
func checkGroupedNames(t *testing.T, call func(method, path, body string) (int, string)) {
	t.Helper()
	if code, body := call("POST", "/api/v1/admin/groups",
		`{"bizTag":"order","group":"day","timeZone":"UTC","format":"ORD{yyyyMMdd}{seq:6}","step":10}`); code != 201 {
		t.Fatalf("declare the group: %d %s", code, body)
	}
	if code, body := call("GET", "/api/v1/segment/order/formatted?count=3", ""); code != 200 {
		t.Fatalf("formatted IDs: %d %s", code, body)
	}
	period := "order:" + time.Now().UTC().Format("20060102")
	tomorrow := "order:" + time.Now().UTC().Add(24*time.Hour).Format("20060102")
	for _, tt := range []struct{ method, path, body string }{
		{"DELETE", "/api/v1/admin/tags/" + period, ""},
		{"POST", "/api/v1/admin/tags", `{"bizTag":"order","step":10}`},
		{"POST", "/api/v1/admin/tags", `{"bizTag":"` + tomorrow + `","step":10}`},
	} {
		if code, body := call(tt.method, tt.path, tt.body); code != http.StatusConflict || !strings.Contains(body, "grouped_tag_row") {
			t.Errorf("%s %s %s = %d %s, want 409 grouped_tag_row", tt.method, tt.path, tt.body, code, body)
		}
	}
	if code, body := call("GET", "/api/v1/segment/order/formatted?count=1", ""); code != 200 || !strings.Contains(body, "000004") {
		t.Errorf("formatted ID after the refusals = %d %s, want the 4th of the period", code, body)
	}
}
