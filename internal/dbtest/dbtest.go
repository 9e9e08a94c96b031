// Package dbtest gives tests a fresh, private database on the real servers:
// each call creates a uniquely named database, returns a DSN in leaf-go's
// format (store/dsn) and drops it when the test ends, so parallel tests and
// packages never share a leaf_alloc table.
//
// The servers come from LEAF_TEST_POSTGRES_DSN and LEAF_TEST_MYSQL_DSN, with
// local defaults outside CI. When a server cannot be reached the test is
// skipped with a hint on how to start it, or fails when CI=true. Under
// `go test -short` (`make check`) [Postgres] and [MySQL] skip without trying
// the server, even when CI=true.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// Default server DSNs, used when the variables are unset outside CI.
const (
	DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQL    = "mysql://root@tcp(127.0.0.1:3306)/test"
)

// connectTimeout bounds the reachability check of a server.
const connectTimeout = 5 * time.Second

// SQLite returns "sqlite:<dir>/leaf.db" in a fresh t.TempDir(); the file does
// not exist yet.
func SQLite(t testing.TB) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "leaf.db")
}

// Postgres creates a fresh database on the server of LEAF_TEST_POSTGRES_DSN
// (a postgres:// URL; default DefaultPostgres) and returns its postgres://
// DSN. The database is dropped (WITH (FORCE)) in t.Cleanup. It skips the
// test in -short mode.
func Postgres(t testing.TB) string {
	t.Helper()
	skipShort(t, "PostgreSQL")
	base := serverDSN(t, "LEAF_TEST_POSTGRES_DSN", DefaultPostgres)
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		unreachable(t, "PostgreSQL", "LEAF_TEST_POSTGRES_DSN", "pg_ctlcluster --skip-systemctl-redirect 15 main start", err)
	}
	defer conn.Close(context.Background())
	name := uniqueName()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("dbtest: create PostgreSQL database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("dbtest: drop PostgreSQL database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop PostgreSQL database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("dbtest: LEAF_TEST_POSTGRES_DSN must be a postgres:// URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// MySQL creates a fresh database on the server of LEAF_TEST_MYSQL_DSN (a
// mysql://user:pass@tcp(host:port)/db DSN; default DefaultMySQL) and returns
// its mysql:// DSN. The database is dropped in t.Cleanup. It skips the test
// in -short mode.
func MySQL(t testing.TB) string {
	t.Helper()
	skipShort(t, "MySQL/MariaDB")
	base := serverDSN(t, "LEAF_TEST_MYSQL_DSN", DefaultMySQL)
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(base, "mysql://"))
	if err != nil {
		t.Fatalf("dbtest: LEAF_TEST_MYSQL_DSN must be mysql://user:pass@tcp(host:port)/db")
	}
	admin := cfg.Clone()
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		unreachable(t, "MySQL/MariaDB", "LEAF_TEST_MYSQL_DSN", "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd", err)
	}
	name := uniqueName()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("dbtest: create MySQL database %s: %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("mysql", admin.FormatDSN())
		if err != nil {
			t.Errorf("dbtest: drop MySQL database %s: %v", name, err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("dbtest: drop MySQL database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return "mysql://" + cfg.FormatDSN()
}

// serverDSN reads the variable, falling back to def outside CI.
func serverDSN(t testing.TB, env, def string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	if inCI() {
		t.Fatalf("dbtest: %s is not set (CI=true)", env)
	}
	return def
}

func unreachable(t testing.TB, server, env, start string, err error) {
	t.Helper()
	msg := fmt.Sprintf("dbtest: %s not reachable (%v); start it with `%s` or set %s", server, err, start, env)
	if inCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// skipShort skips t in -short mode, before any connection attempt: the
// quick loop runs without database servers, in CI too.
func skipShort(t testing.TB, server string) {
	t.Helper()
	if testing.Short() {
		t.Skip("dbtest: skipped in -short mode: needs " + server)
	}
}

func inCI() bool { return os.Getenv("CI") == "true" }

// uniqueName returns a database name no other test uses: a fixed prefix, the
// process ID and 8 random bytes, all lowercase so that no dialect quotes it.
func uniqueName() string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("leaf_test_%d_%s", os.Getpid(), hex.EncodeToString(b[:]))
}
