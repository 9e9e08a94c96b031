package mysql_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/dbproctest"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/mysql"
)

// hostsDSN returns dsn with its tcp(…) address replaced by addrs.
func hostsDSN(t *testing.T, dsn string, addrs ...string) string {
	t.Helper()
	i := strings.Index(dsn, "tcp(")
	j := strings.Index(dsn, ")/")
	if i < 0 || j < i {
		t.Fatalf("no tcp(…) address in the test DSN")
	}
	return dsn[:i+4] + strings.Join(addrs, ",") + dsn[j:]
}

// sharedAddr is the host:port of the shared MariaDB in dsn.
func sharedAddr(t *testing.T, dsn string) string {
	t.Helper()
	i := strings.Index(dsn, "tcp(")
	j := strings.Index(dsn, ")/")
	return dsn[i+4 : j]
}

func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// dbName is the database name of a mysql:// DSN.
func dbName(dsn string) string {
	name := dsn[strings.Index(dsn, ")/")+2:]
	name, _, _ = strings.Cut(name, "?")
	return name
}

// privateServer starts a private MariaDB with a database named like dsn's.
func privateServer(t *testing.T, dsn string) *dbproctest.Server {
	t.Helper()
	srv := dbproctest.New(t, dbproctest.MariaDB)
	if _, err := rawDB(t, srv.DSN()).Exec("CREATE DATABASE " + dbName(dsn)); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestHostsFirstClosed: the first host of the list refuses connections, so
// the store works on the second.
func TestHostsFirstClosed(t *testing.T) {
	dsn := dbtest.MySQL(t)
	s := open(t, hostsDSN(t, dsn, closedAddr(t), sharedAddr(t, dsn)))
	ctx := context.Background()
	if err := s.Create(ctx, store.Row{BizTag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Allocate(ctx, "t", 0, 0); err != nil || a.MaxID != 11 {
		t.Fatalf("Allocate() = %+v, %v, want max_id 11", a, err)
	}
}

// TestHostsReadOnly: a server with read_only=ON is refused with
// ErrNodeRefused; in a list, the next host is used and the read-only one
// gets nothing, not even the migrations.
func TestHostsReadOnly(t *testing.T) {
	dsn := dbtest.MySQL(t)
	srv := privateServer(t, dsn)
	priv := rawDB(t, hostsDSN(t, dsn, srv.Addr()))
	if _, err := priv.Exec("SET GLOBAL read_only = ON"); err != nil {
		t.Fatal(err)
	}
	_, err := mysql.Open(context.Background(), hostsDSN(t, dsn, srv.Addr()), true)
	if !errors.Is(err, mysql.ErrNodeRefused) || !strings.Contains(err.Error(), "read_only") {
		t.Fatalf("Open(read-only server) = %v, want %v naming read_only", err, mysql.ErrNodeRefused)
	}
	s := open(t, hostsDSN(t, dsn, srv.Addr(), sharedAddr(t, dsn)))
	ctx := context.Background()
	if err := s.Create(ctx, store.Row{BizTag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Allocate(ctx, "t", 0, 0); err != nil || a.MaxID != 11 {
		t.Fatalf("Allocate() = %+v, %v, want max_id 11", a, err)
	}
	var n int
	if err := priv.QueryRow(`SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?`, dbName(dsn)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the read-only server got %d tables, want 0", n)
	}
}

// TestHostsFailover: the store works on the first host; that server is
// killed (kill -9) and the next allocation, which finds the pooled
// connections dead, carries on on the second host.
func TestHostsFailover(t *testing.T) {
	dsn := dbtest.MySQL(t)
	srv := privateServer(t, dsn)
	ctx := context.Background()
	// The same table and row on both servers (not a cluster: only where
	// the allocation went matters here).
	for _, d := range []string{hostsDSN(t, dsn, srv.Addr()), dsn} {
		s := open(t, d)
		if err := s.Create(ctx, store.Row{BizTag: "t", MaxID: 1, Step: 10}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if _, err := rawDB(t, hostsDSN(t, dsn, srv.Addr())).Exec(`UPDATE leaf_alloc SET max_id = 1000 WHERE biz_tag = 't'`); err != nil {
		t.Fatal(err)
	}
	s := open(t, hostsDSN(t, dsn, srv.Addr(), sharedAddr(t, dsn)))
	if a, err := s.Allocate(ctx, "t", 0, 0); err != nil || a.MaxID != 1010 {
		t.Fatalf("Allocate() on the first host = %+v, %v, want max_id 1010", a, err)
	}
	srv.Kill9(t)
	if a, err := s.Allocate(ctx, "t", 0, 0); err != nil || a.MaxID != 11 {
		t.Fatalf("Allocate() after the first host died = %+v, %v, want max_id 11 from the second", a, err)
	}
}
