package zkworker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/zktest"
)

// TestLostNodes: the namespace loses every node (as when ZooKeeper's data is
// lost) while worker A runs. B, restarted on its cache file before A's next
// upload, takes its old worker ID 1 back instead of the next sequential
// number (0, A's); a new worker C does not take 1, which the restarted
// counter hands out next but B's node holds; A's next upload creates its
// node again under the same name.
func TestLostNodes(t *testing.T) {
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	conn := zktest.Conn(t, addr)
	oa := options(t, addr, name, "1")
	oa.HeartbeatInterval = 2 * time.Second
	a := claim(t, oa)
	ob := options(t, addr, name, "2")
	b := claim(t, ob)
	if a.WorkerID() != 0 || b.WorkerID() != 1 {
		t.Fatalf("worker IDs %d and %d, want 0 and 1", a.WorkerID(), b.WorkerID())
	}
	b.Close(context.Background())
	if err := zktest.DeleteTree(conn, "/snowflake/"+name); err != nil {
		t.Fatal(err)
	}

	b2 := claim(t, ob)
	if b2.WorkerID() != 1 {
		t.Errorf("B restarted after the loss: worker ID %d, want 1 (its cache file)", b2.WorkerID())
	}
	c := claim(t, options(t, addr, name, "3"))
	if c.WorkerID() == 0 || c.WorkerID() == 1 {
		t.Errorf("new worker C got worker ID %d, held by A or B", c.WorkerID())
	}

	forever := "/snowflake/" + name + "/forever"
	wantA := "127.0.0.1:1-0000000000"
	var kids []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		kids, _, _ = conn.Children(forever)
		if slices.Contains(kids, wantA) {
			break
		}
	}
	if !slices.Contains(kids, wantA) {
		t.Fatalf("A's node not created again after the loss: children %v, want %s", kids, wantA)
	}
	kids, _, _ = conn.Children(forever)
	slices.Sort(kids)
	want := []string{wantA, "127.0.0.1:2-0000000001", c.Status().Node[len(forever)+1:]}
	slices.Sort(want)
	if !slices.Equal(kids, want) {
		t.Errorf("nodes after the loss %v, want %v", kids, want)
	}
}
