package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/mysql"
	"github.com/leaf-go/leaf/store/storetest"
)

func open(t *testing.T, dsn string) *mysql.Store {
	t.Helper()
	s, err := mysql.Open(context.Background(), dsn, true)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, dbtest.MySQL(t)) })
}

// TestNewNotStarted: a Store built by New refuses every call with
// store.ErrNotOpen, touching no table, until Start; then it serves. A
// failed Start leaves it refusing, with that failure in the error, on a
// single host and on a host list (each connector holds the gate).
func TestNewNotStarted(t *testing.T) {
	dsn := dbtest.MySQL(t)
	ref := open(t, dsn)
	s, err := mysql.New(dsn)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.RunNotOpen(t, ref, s, s.Start)

	for _, down := range []string{"u:s3cr3t@tcp(127.0.0.1:1)/db?timeout=2s", "u:s3cr3t@tcp(127.0.0.1:1,127.0.0.1:2)/db?timeout=2s"} {
		st, err := mysql.New(down)
		if err != nil {
			t.Fatalf("New(unreachable) = %v", err)
		}
		defer st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Start(ctx, true); err == nil {
			t.Fatal("Start(unreachable) = nil, want an error")
		}
		err = st.Ping(ctx)
		if !errors.Is(err, store.ErrNotOpen) || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Ping after a failed Start = %v, want store.ErrNotOpen naming the failed connect, without the password", err)
		}
	}
}

// TestAdoptLeafDatabase points the store at a database that Leaf itself set
// up, with Leaf's exact DDL and rows: Open with migrate must leave the table
// and rows alone, and allocation must continue from Leaf's max_id.
func TestAdoptLeafDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQL(t)
	db, err := sql.Open("mysql", strings.TrimPrefix(dsn, "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leaf := []string{
		"CREATE TABLE `leaf_alloc` (\n" +
			"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
			"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
			"  `step` int(11) NOT NULL,\n" +
			"  `description` varchar(256)  DEFAULT NULL,\n" +
			"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
			"  PRIMARY KEY (`biz_tag`)\n" +
			") ENGINE=InnoDB",
		"insert into leaf_alloc(biz_tag, max_id, step, description) values('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')",
		"insert into leaf_alloc(biz_tag, max_id, step, description, update_time) values('order', 40001, 1000, NULL, '2020-01-02 03:04:05')",
	}
	for _, q := range leaf {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("Leaf setup %q: %v", q, err)
		}
	}
	dump := func() string {
		var s string
		if err := db.QueryRowContext(ctx, "SELECT GROUP_CONCAT(CONCAT_WS('|', biz_tag, max_id, step, IFNULL(description, 'NULL'), update_time) ORDER BY biz_tag SEPARATOR '\n') FROM leaf_alloc").Scan(&s); err != nil {
			t.Fatalf("dump: %v", err)
		}
		return s
	}
	before := dump()

	for i := range 2 { // the second Open finds the migration applied
		s := open(t, dsn)
		if got := dump(); got != before {
			t.Fatalf("rows after Open #%d = %q, want untouched %q", i+1, got, before)
		}
		rows, err := s.Rows(ctx)
		if err != nil || len(rows) != 2 || rows[1].BizTag != "order" || rows[1].MaxID != 40001 ||
			!rows[1].UpdateTime.Equal(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)) {
			t.Errorf("Rows() = %+v, %v, want Leaf's rows", rows, err)
		}
	}
	s := open(t, dsn)
	tests := []struct {
		give string
		want store.Allocation
	}{
		{"leaf-segment-test", store.Allocation{BizTag: "leaf-segment-test", MaxID: 2001, Step: 2000, DBStep: 2000}},
		{"order", store.Allocation{BizTag: "order", MaxID: 41001, Step: 1000, DBStep: 1000}},
	}
	for _, tt := range tests {
		if got, err := s.Allocate(ctx, tt.give, 0, 0); err != nil || got != tt.want {
			t.Errorf("Allocate(%q, 0) = %+v, %v, want %+v, nil", tt.give, got, err, tt.want)
		}
	}
}

// TestInterpolateParams: Open fills placeholders in client-side unless the
// DSN says otherwise or its collation is one the driver refuses for it, and
// every variant still allocates (a quoted tag included).
func TestInterpolateParams(t *testing.T) {
	base := dbtest.MySQL(t)
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		name, param string
		want        bool
	}{
		{"default", "", true},
		{"explicit-false", "interpolateParams=false", false},
		{"explicit-true", "interpolateParams=true", true},
		{"unsafe-collation", "collation=gbk_chinese_ci", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := base
			if c.param != "" {
				dsn += sep + c.param
			}
			s := open(t, dsn)
			if got := s.Interpolates(); got != c.want {
				t.Errorf("Interpolates() = %v, want %v", got, c.want)
			}
			ctx := context.Background()
			tag := `it's "quoted" \ ` + c.name
			if err := s.Create(ctx, store.Row{BizTag: tag, MaxID: 1, Step: 10}); err != nil {
				t.Fatal(err)
			}
			a, err := s.Allocate(ctx, tag, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Allocate(ctx, tag, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if a.MaxID != 11 || b.MaxID != 21 {
				t.Errorf("max_id after two allocations = %d, %d, want 11, 21", a.MaxID, b.MaxID)
			}
		})
	}
}

// TestExactTagNames: MySQL's default collation is case-insensitive and
// ignores trailing spaces, but Leaf (and the PostgreSQL and SQLite stores)
// key tags by their exact name: another spelling is not found, and its
// attempted allocation reserves nothing.
func TestExactTagNames(t *testing.T) {
	s := open(t, dbtest.MySQL(t))
	ctx := context.Background()
	if err := s.Create(ctx, store.Row{BizTag: "Exact", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"exact", "EXACT", "Exact "} {
		if a, err := s.Allocate(ctx, other, 0, 0); !errors.Is(err, store.ErrTagNotFound) {
			t.Errorf("Allocate(%q) = %+v, %v; want %v", other, a, err, store.ErrTagNotFound)
		}
		if v, err := s.MaxID(ctx, other); !errors.Is(err, store.ErrTagNotFound) {
			t.Errorf("MaxID(%q) = %d, %v; want %v", other, v, err, store.ErrTagNotFound)
		}
	}
	a, err := s.Allocate(ctx, "Exact", 0, 0)
	if err != nil || a.MaxID != 11 {
		t.Errorf("Allocate(%q) = %+v, %v; want max_id 11 (the other spellings reserved nothing)", "Exact", a, err)
	}
}

// TestEngine: the local server is MariaDB without Galera; a DSN parameter
// that sets a session variable shows in the report (no warning either way).
func TestEngine(t *testing.T) {
	s := open(t, dbtest.MySQL(t))
	e, err := s.Engine(context.Background())
	if err != nil || (e.Name != store.EngineMariaDB && e.Name != store.EngineMySQL) || e.Version == "" || e.Warnings != nil {
		t.Errorf("Engine() = %+v, %v, want MariaDB or MySQL with a version and no warnings", e, err)
	}
}
