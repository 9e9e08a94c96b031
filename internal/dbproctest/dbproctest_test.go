package dbproctest_test

import (
	"database/sql"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leaf-go/leaf/internal/dbproctest"
)

// TestStopKillStart: a committed row survives a clean stop and a kill -9,
// and the server answers on the same DSN after each start.
func TestStopKillStart(t *testing.T) {
	tests := []struct {
		give   dbproctest.Kind
		driver string
	}{
		{dbproctest.Postgres, "pgx"},
		{dbproctest.MariaDB, "mysql"},
	}
	for _, tt := range tests {
		t.Run(string(tt.give), func(t *testing.T) {
			t.Parallel()
			s := dbproctest.New(t, tt.give)
			db, err := sql.Open(tt.driver, strings.TrimPrefix(s.DSN(), "mysql://"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxIdleConns(0) // a fresh connection after every restart
			if _, err := db.Exec(`CREATE TABLE t (n int)`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO t VALUES (1)`); err != nil {
				t.Fatal(err)
			}
			s.Stop(t)
			if err := db.Ping(); err == nil {
				t.Fatalf("Ping after Stop = nil, want an error")
			}
			s.Start(t)
			if _, err := db.Exec(`INSERT INTO t VALUES (2)`); err != nil {
				t.Fatal(err)
			}
			s.Kill9(t)
			s.Start(t)
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
				t.Errorf("count(*) after stop, kill -9 and starts = %d, %v; want 2", n, err)
			}
		})
	}
}
