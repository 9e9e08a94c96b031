package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/migrations"
)

// LeafDDL is leaf_alloc exactly as Meituan Leaf's README creates it, with its
// sample row.
const LeafDDL = "CREATE TABLE `leaf_alloc` (\n" +
	"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
	"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
	"  `step` int(11) NOT NULL,\n" +
	"  `description` varchar(256)  DEFAULT NULL,\n" +
	"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`biz_tag`)\n" +
	") ENGINE=InnoDB"

// LeafSample is the row Leaf's README inserts.
const LeafSample = "insert into leaf_alloc(biz_tag, max_id, step, description) values('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')"

// dialects opens a fresh database of each dialect through database/sql.
var dialects = []struct {
	name string
	open func(t *testing.T) *sql.DB
}{
	{"sqlite", func(t *testing.T) *sql.DB {
		return sqlOpen(t, "sqlite", strings.TrimPrefix(dbtest.SQLite(t), "sqlite:"))
	}},
	{"postgres", func(t *testing.T) *sql.DB { return sqlOpen(t, "pgx", dbtest.Postgres(t)) }},
	{"mysql", func(t *testing.T) *sql.DB {
		// Status needs parseTime=true on MySQL, as store/dsn sets it.
		return sqlOpen(t, "mysql", strings.TrimPrefix(dbtest.MySQL(t), "mysql://")+"?parseTime=true")
	}},
}

func sqlOpen(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("sql.Open(%q) = %v", driver, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestUpTwiceIsNoop(t *testing.T) {
	ctx := context.Background()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			st, err := migrations.Status(ctx, db, d.name)
			if err != nil || len(st) == 0 || st[0].Applied || st[0].Version != 1 || st[0].Name != "00001_leaf_alloc.sql" {
				t.Fatalf("Status() before Up = %+v, %v, want version 1 pending", st, err)
			}
			for i := range 2 {
				if err := migrations.Up(ctx, db, d.name); err != nil {
					t.Fatalf("Up() #%d = %v, want nil", i+1, err)
				}
			}
			st, err = migrations.Status(ctx, db, d.name)
			if err != nil {
				t.Fatalf("Status() = %v", err)
			}
			for _, v := range st {
				if !v.Applied || v.AppliedAt.IsZero() {
					t.Errorf("Status() after Up: %+v, want applied", v)
				}
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+migrations.VersionTable+" WHERE version_id = 1").Scan(&n); err != nil || n != 1 {
				t.Errorf("version 1 recorded %d times (%v), want once", n, err)
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO leaf_alloc (biz_tag, step) VALUES ('x', 5)"); err != nil {
				t.Fatalf("insert into leaf_alloc: %v", err)
			}
			var maxID int64
			if err := db.QueryRowContext(ctx, "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'x'").Scan(&maxID); err != nil || maxID != 1 {
				t.Errorf("default max_id = %d, %v, want 1 (Leaf's default)", maxID, err)
			}
		})
	}
}

func TestUpConcurrent(t *testing.T) {
	ctx := context.Background()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Go(func() { errs[i] = migrations.Up(ctx, db, d.name) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("concurrent Up() #%d = %v, want nil", i, err)
				}
			}
		})
	}
}

func TestAdoptLeafTable(t *testing.T) {
	ctx := context.Background()
	db := dialects[2].open(t)
	for _, q := range []string{LeafDDL, LeafSample, "UPDATE leaf_alloc SET max_id = 123456789 WHERE biz_tag = 'leaf-segment-test'"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("Leaf DDL: %v", err)
		}
	}
	before := dump(t, db)
	ddl := showCreate(t, db)
	if err := migrations.Up(ctx, db, "mysql"); err != nil {
		t.Fatalf("Up() on a Leaf database = %v, want nil", err)
	}
	if got := dump(t, db); got != before {
		t.Errorf("rows after Up() = %q, want unchanged %q", got, before)
	}
	if got := showCreate(t, db); got != ddl {
		t.Errorf("table after Up() = %q, want unchanged %q", got, ddl)
	}
}

// TestMySQLSchemaIsLeafs checks that the migration creates the very table
// Leaf's DDL creates.
func TestMySQLSchemaIsLeafs(t *testing.T) {
	ctx := context.Background()
	leaf, ours := dialects[2].open(t), dialects[2].open(t)
	if _, err := leaf.ExecContext(ctx, LeafDDL); err != nil {
		t.Fatalf("Leaf DDL: %v", err)
	}
	if err := migrations.Up(ctx, ours, "mysql"); err != nil {
		t.Fatalf("Up() = %v", err)
	}
	if got, want := showCreate(t, ours), showCreate(t, leaf); got != want {
		t.Errorf("SHOW CREATE TABLE leaf_alloc = %q, want Leaf's %q", got, want)
	}
}

func dump(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query("SELECT CONCAT_WS('|', biz_tag, max_id, step, description, update_time) FROM leaf_alloc ORDER BY biz_tag")
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("dump: %v", err)
		}
		b.WriteString(s + "\n")
	}
	return b.String()
}

func showCreate(t *testing.T, db *sql.DB) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRow("SHOW CREATE TABLE leaf_alloc").Scan(&name, &ddl); err != nil {
		t.Fatalf("SHOW CREATE TABLE: %v", err)
	}
	return ddl
}

func TestUnknownDialect(t *testing.T) {
	db := dialects[0].open(t)
	if err := migrations.Up(context.Background(), db, "oracle"); !errors.Is(err, migrations.ErrDialect) {
		t.Errorf("Up(%q) = %v, want %v", "oracle", err, migrations.ErrDialect)
	}
	if _, err := migrations.Status(context.Background(), db, "oracle"); !errors.Is(err, migrations.ErrDialect) {
		t.Errorf("Status(%q) = %v, want %v", "oracle", err, migrations.ErrDialect)
	}
}
