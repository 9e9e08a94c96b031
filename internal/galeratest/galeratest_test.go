package galeratest_test

import (
	"database/sql"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/internal/galeratest"
)

// TestCluster: three synced nodes in one primary component; a row written
// on the first node is read on the third (wsrep_sync_wait=1 waits for it).
func TestCluster(t *testing.T) {
	c := galeratest.New(t, 3)
	for _, n := range c.Nodes {
		st, err := n.Status()
		if err != nil || st["wsrep_cluster_size"] != "3" || st["wsrep_cluster_status"] != "Primary" {
			t.Fatalf("%s status = %v, %v; want a 3-node primary component", n.Name(), st, err)
		}
	}
	open := func(n *galeratest.Node) *sql.DB {
		db, err := sql.Open("mysql", strings.TrimPrefix(n.DSN(), "mysql://")+"&wsrep_sync_wait=1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	if _, err := open(c.Nodes[0]).Exec("CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := open(c.Nodes[0]).Exec("INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	var got int
	if err := open(c.Nodes[2]).QueryRow("SELECT id FROM t").Scan(&got); err != nil || got != 42 {
		t.Errorf("row on %s = %d, %v; want 42", c.Nodes[2].Name(), got, err)
	}
}
