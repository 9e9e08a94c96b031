package dbtest_test

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/internal/dbtest"
)

// TestFreshDatabases checks that every call gets its own database and that
// the database is gone once the test that asked for it has ended.
func TestFreshDatabases(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		give   func(testing.TB) string
		exists func(t *testing.T, dsn string) bool
	}{
		{"postgres", dbtest.Postgres, func(t *testing.T, dsn string) bool {
			c, err := pgx.Connect(ctx, server("LEAF_TEST_POSTGRES_DSN", dbtest.DefaultPostgres))
			if err != nil {
				t.Skip(err)
			}
			defer c.Close(ctx)
			name := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
			var n int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		}},
		{"mysql", dbtest.MySQL, func(t *testing.T, dsn string) bool {
			db, err := sql.Open("mysql", strings.TrimPrefix(server("LEAF_TEST_MYSQL_DSN", dbtest.DefaultMySQL), "mysql://"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			name := dsn[strings.LastIndex(dsn, "/")+1:]
			var n int
			if err := db.QueryRow("SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
				t.Skip(err)
			}
			return n == 1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a, b string
			t.Run("use", func(t *testing.T) {
				a, b = tt.give(t), tt.give(t)
				if a == b {
					t.Fatalf("two calls returned the same DSN %q", a)
				}
				if !tt.exists(t, a) {
					t.Fatalf("database of %q does not exist during the test", a)
				}
			})
			if a == "" {
				t.Skip("server not reachable")
			}
			if tt.exists(t, a) || tt.exists(t, b) {
				t.Errorf("databases of %q and %q still exist after the test", a, b)
			}
		})
	}
}

func server(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

func TestSQLite(t *testing.T) {
	if got := dbtest.SQLite(t); !strings.HasPrefix(got, "sqlite:/") || !strings.HasSuffix(got, "/leaf.db") {
		t.Errorf("SQLite() = %q, want sqlite:<tempdir>/leaf.db", got)
	}
}
