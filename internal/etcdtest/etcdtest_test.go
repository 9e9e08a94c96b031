package etcdtest

import (
	"context"
	"testing"
	"time"
)

// TestCluster: a put is read back; with the leader stopped the other two elect a new one and
// keep serving; with a second member stopped no linearizable read succeeds; with both back the
// value is there.
func TestCluster(t *testing.T) {
	c := Start(t)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/etcdtest/k", "v"); err != nil {
		t.Fatal(err)
	}
	lead := c.Leader(t)
	c.Member(lead).Stop()
	next := c.Leader(t)
	if next == lead {
		t.Fatalf("leader still %d after it was stopped", lead)
	}
	if _, err := cli.Put(ctx, "/etcdtest/k", "v2"); err != nil {
		t.Fatalf("put with 2 of 3 members: %v", err)
	}
	c.Member(next).Stop()
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	_, err := cli.Get(short, "/etcdtest/k")
	cancelShort()
	if err == nil {
		t.Fatal("linearizable get succeeded with 1 of 3 members")
	}
	c.Member(lead).Restart(t)
	c.Member(next).Restart(t)
	c.Leader(t)
	r, err := cli.Get(ctx, "/etcdtest/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v2" {
		t.Fatalf("got %v, want v2", r.Kvs)
	}
}
