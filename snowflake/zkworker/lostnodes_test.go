package zkworker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake/zkworker"
)

// TestLostNodes: the namespace loses every node (as when ZooKeeper's data is
// lost) while worker A runs. B, restarted on its cache file, takes its old
// worker ID 1 back instead of the next sequential number; a new worker C does
// not take 1, which B's node holds. A finds its node gone at its next upload:
// a conflict (another server may have drawn its number meanwhile), so A stops
// backing IDs and does not create its node again.
func TestLostNodes(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	conn := zktest.Conn(t, addr)
	oa := options(t, addr, name, "1")
	oa.HeartbeatInterval = 500 * time.Millisecond
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
	if c.WorkerID() == 1 {
		t.Errorf("new worker C got worker ID %d, held by B", c.WorkerID())
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Ready() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.Ready(); !errors.Is(err, zkworker.ErrConflict) || !strings.Contains(err.Error(), "is gone") && !strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("A's Ready() after the loss = %v, want %v saying its node is gone", err, zkworker.ErrConflict)
	}
	if !a.Expiry().Before(time.Now()) {
		t.Errorf("A's Expiry() = %v, want in the past", a.Expiry())
	}
	// A does not create its node again. Only time can tell: A's heartbeats, which would
	// write it, show nowhere when they run (a conflicted worker uploads nothing), so watch
	// the namespace through two of their intervals.
	forever := "/snowflake/" + name + "/forever"
	waittest.Quiet(t, 2*oa.HeartbeatInterval, "A created its node again after the loss", func() bool {
		kids, _, _ := conn.Children(forever)
		return slices.ContainsFunc(kids, func(k string) bool { return strings.HasPrefix(k, "127.0.0.1:1-") })
	})
	kids, _, _ := conn.Children(forever)
	slices.Sort(kids)
	want := []string{"127.0.0.1:2-0000000001", c.Status().Node[len(forever)+1:]}
	slices.Sort(want)
	if !slices.Equal(kids, want) {
		t.Errorf("nodes after the loss %v, want %v (B's and C's; A's not created again)", kids, want)
	}
	if b2.Ready() != nil || c.Ready() != nil {
		t.Errorf("B and C Ready() = %v, %v, want nil", b2.Ready(), c.Ready())
	}
}
