package zkworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/zkworker"
)

// TestSecondHolderRefused: a second process resolving to the same ip:port (and so to the same
// worker ID) while the first runs refuses to start, after waiting out the session timeout in
// case the holder had crashed, and names the holder.
func TestSecondHolderRefused(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	o := options(t, addr, name, "8080")
	o.SessionTimeout = 4 * time.Second
	a := claim(t, o)
	second := o
	second.CacheDir = t.TempDir() // another host's tmpdir
	t0 := time.Now()
	b, err := zkworker.Claim(context.Background(), second)
	if err == nil {
		b.Close(context.Background())
		t.Fatalf("second Claim on 127.0.0.1:8080 while worker %d runs = nil error, want %v", a.WorkerID(), zkworker.ErrWorkerIDHeld)
	}
	if !errors.Is(err, zkworker.ErrWorkerIDHeld) {
		t.Fatalf("second Claim = %v, want %v", err, zkworker.ErrWorkerIDHeld)
	}
	for _, want := range []string{"127.0.0.1:8080", "pid", fmt.Sprintf("worker ID %d", a.WorkerID())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	if took := time.Since(t0); took < o.SessionTimeout {
		t.Errorf("refused after %v, want after waiting the session timeout %v for a crashed holder", took, o.SessionTimeout)
	}
	if a.Ready() != nil {
		t.Errorf("the first holder's Ready() = %v after the refused second claim, want nil", a.Ready())
	}
	// Closed (graceful stop), the first holder's live node goes at once: a new process starts.
	a.Close(context.Background())
	c := claim(t, second)
	if c.WorkerID() != a.WorkerID() {
		t.Errorf("after the holder stopped, Claim got worker ID %d, want its %d", c.WorkerID(), a.WorkerID())
	}
}

// TestCrashedHolderExpires: a live node left by a crashed process (its session still open on
// the server) does not stop a restart for good: Claim waits until ZooKeeper removes it.
func TestCrashedHolderExpires(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	o := options(t, addr, name, "8080")
	o.SessionTimeout = 4 * time.Second
	w := claim(t, o)
	id := w.WorkerID()
	w.Close(context.Background())

	// The "crashed" holder: another session's live node for our worker ID, closed 1 s later.
	ghost := zktest.Conn(t, addr)
	live := fmt.Sprintf("/snowflake/%s/live/%d", name, id)
	if _, err := ghost.Create(live, []byte(`{"address":"127.0.0.1:8080"}`), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(time.Second); ghost.Close() }()
	t0 := time.Now()
	w2 := claim(t, o)
	if w2.WorkerID() != id {
		t.Errorf("restart got worker ID %d, want %d", w2.WorkerID(), id)
	}
	if took := time.Since(t0); took < 900*time.Millisecond {
		t.Errorf("Claim returned after %v, before the old live node was gone", took)
	}
}

// TestRuntimeConflict: once the claim is found broken while the worker runs, the lease is lost:
// the worker stops backing IDs at once (Expiry in the past, the generator refuses with
// ErrLeaseExpired) and for good (Lost is closed: leaf-server claims again), and Ready says why.
func TestRuntimeConflict(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	tests := []struct {
		name    string
		breakIt func(t *testing.T, conn *zk.Conn, w *zkworker.Worker, ns string)
		want    string
	}{
		{
			name: "live node deleted",
			breakIt: func(t *testing.T, conn *zk.Conn, w *zkworker.Worker, ns string) {
				if err := conn.Delete(fmt.Sprintf("/snowflake/%s/live/%d", ns, w.WorkerID()), -1); err != nil {
					t.Fatal(err)
				}
			},
			want: "was deleted",
		},
		{
			name: "live node taken by another session",
			breakIt: func(t *testing.T, conn *zk.Conn, w *zkworker.Worker, ns string) {
				live := fmt.Sprintf("/snowflake/%s/live/%d", ns, w.WorkerID())
				_, err := conn.Multi(&zk.DeleteRequest{Path: live, Version: -1},
					&zk.CreateRequest{Path: live, Data: []byte(`{"address":"10.1.1.1:9"}`), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral})
				if err != nil {
					t.Fatal(err)
				}
			},
			want: "belongs to another ZooKeeper session",
		},
		{
			name: "Java Leaf uploads to our node",
			breakIt: func(t *testing.T, conn *zk.Conn, w *zkworker.Worker, ns string) {
				data := fmt.Sprintf(`{"ip":"127.0.0.1","port":"8080","timestamp":%d}`, time.Now().UnixMilli())
				if _, err := conn.Set(w.Status().Node, []byte(data), -1); err != nil {
					t.Fatal(err)
				}
			},
			want: "another process wrote the node",
		},
		{
			name: "ZooKeeper lost the namespace",
			breakIt: func(t *testing.T, conn *zk.Conn, w *zkworker.Worker, ns string) {
				if err := zktest.DeleteTree(conn, "/snowflake/"+ns); err != nil {
					t.Fatal(err)
				}
			},
			want: "deleted", // the live node (contact) or the /forever node (upload), whichever is found first,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := zktest.Name(t, addr)
			conn := zktest.Conn(t, addr)
			o := options(t, addr, ns, "8080")
			o.HeartbeatInterval = 50 * time.Millisecond
			w := claim(t, o)
			g, err := snowflake.New(context.Background(), snowflake.Settings{Source: w})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.Next(context.Background()); err != nil {
				t.Fatalf("Next() before the conflict = %v", err)
			}
			// A few clean heartbeats, no false conflict: wait for three uploads (each
			// checks the node and the live node), not for a fixed time.
			uploads := map[time.Time]bool{}
			waittest.For(t, 10*time.Second, "three uploads", func() bool {
				if at := w.Status().LastUpload; !at.IsZero() {
					uploads[at] = true
				}
				return len(uploads) >= 3
			})
			if err := w.Ready(); err != nil {
				t.Fatalf("Ready() before the conflict = %v", err)
			}
			tt.breakIt(t, conn, w, ns)
			deadline := time.Now().Add(5 * time.Second)
			for w.Ready() == nil && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			err = w.Ready()
			if !errors.Is(err, zkworker.ErrConflict) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Ready() = %v, want %v saying %q", err, zkworker.ErrConflict, tt.want)
			}
			if exp := w.Expiry(); !exp.Before(time.Now()) {
				t.Errorf("Expiry() = %v after the conflict, want in the past", exp)
			}
			if _, err := g.Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
				t.Errorf("Next() after the conflict = %v, want %v", err, snowflake.ErrLeaseExpired)
			}
			select {
			case <-w.Lost():
			default:
				t.Error("Lost() not closed after the conflict")
			}
			// Never resumes: later heartbeats leave the conflict in place. Only time can
			// tell: a conflicted worker uploads nothing, so nothing shows that a heartbeat
			// ran since.
			waittest.Quiet(t, 4*o.HeartbeatInterval, "Ready() = nil again after the conflict", func() bool { return w.Ready() == nil })
			var d map[string]any
			b, _ := json.Marshal(w.Details())
			_ = json.Unmarshal(b, &d)
			if c, _ := d["conflict"].(string); !strings.Contains(c, tt.want) {
				t.Errorf("Details()[conflict] = %q, want the reason", c)
			}
		})
	}
}

// TestOwnWriteNoConflict: the worker's own uploads (many, kicked by Store) never look like
// another process's.
func TestOwnWriteNoConflict(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	o := options(t, addr, zktest.Name(t, addr), "8080")
	o.HeartbeatInterval = 10 * time.Millisecond
	w := claim(t, o)
	for i := range 50 {
		if err := w.Store(context.Background(), time.Now().Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.Ready(); err != nil {
		t.Errorf("Ready() after 50 own uploads = %v, want nil", err)
	}
}

// TestAdvertisedAddressNormalised: "[::1]" and "0:0::1" are one identity, so the same worker ID.
func TestAdvertisedAddressNormalised(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	o := options(t, addr, name, "8080")
	o.IP = "[::1]"
	w := claim(t, o)
	if got := w.Status().Address; got != "::1:8080" {
		t.Errorf("Status().Address = %q, want ::1:8080", got)
	}
	w.Close(context.Background())
	o.IP = "0:0::1"
	if w2 := claim(t, o); w2.WorkerID() != w.WorkerID() {
		t.Errorf("Claim with 0:0::1 got worker ID %d, want %d as with [::1]", w2.WorkerID(), w.WorkerID())
	}
}

func TestNormaliseIP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give   string
		want   string
		wantIP bool
	}{
		{give: "10.0.0.7", want: "10.0.0.7", wantIP: true},
		{give: "[::1]", want: "::1", wantIP: true},
		{give: "::1", want: "::1", wantIP: true},
		{give: "[2001:DB8:0:0::1]", want: "2001:db8::1", wantIP: true},
		{give: "::ffff:10.0.0.7", want: "10.0.0.7", wantIP: true},
		{give: "leaf-1.example.com", want: "leaf-1.example.com", wantIP: false},
	}
	for _, tt := range tests {
		got, isIP := zkworker.NormaliseIP(tt.give)
		if got != tt.want || isIP != tt.wantIP {
			t.Errorf("NormaliseIP(%q) = %q, %v, want %q, %v", tt.give, got, isIP, tt.want, tt.wantIP)
		}
	}
}

// TestSealStoresExactMark: a graceful shutdown (Generator.Seal, then Close) leaves the last
// issued millisecond + 1 in the node and the cache file, so the restart loads that mark, not
// the one stored up to the high-water window ahead.
func TestSealStoresExactMark(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	o := options(t, addr, zktest.Name(t, addr), "8080")
	w := claim(t, o)
	g, err := snowflake.New(context.Background(), snowflake.Settings{Source: w})
	if err != nil {
		t.Fatal(err)
	}
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ahead := g.Stats().HighWater; time.Until(ahead) < time.Second {
		t.Fatalf("stored mark %v, want about the window ahead of the clock", ahead)
	}
	if err := g.Seal(context.Background()); err != nil {
		t.Fatalf("Seal() = %v", err)
	}
	w.Close(context.Background())
	want := snowflake.Decompose(id).Time().UnixMilli() + 1
	conn := zktest.Conn(t, addr)
	data, _, err := conn.Get(w.Status().Node)
	if err != nil {
		t.Fatal(err)
	}
	var ep struct{ Timestamp int64 }
	if err := json.Unmarshal(data, &ep); err != nil || ep.Timestamp != want {
		t.Errorf("node timestamp after Seal = %d (%v), want the last issued ms + 1 = %d", ep.Timestamp, err, want)
	}
	w2 := claim(t, o)
	if got, _ := w2.Load(context.Background()); got.UnixMilli() != want {
		t.Errorf("Load() after a graceful restart = %d, want %d", got.UnixMilli(), want)
	}
}

// TestLiveJavaLeafAtStart: a claim over a Java Leaf node on our ip:port written lately (it has
// no live node) is held back a session timeout + margin; a node written again meanwhile (a
// live Java Leaf) loses the lease without an ID issued; a Java node that has stopped uploading
// is reused.
func TestLiveJavaLeafAtStart(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	for _, live := range []bool{true, false} {
		t.Run(map[bool]string{true: "uploading", false: "stopped"}[live], func(t *testing.T) {
			name := zktest.Name(t, addr)
			conn := zktest.Conn(t, addr)
			node := leafNode(t, conn, name, "127.0.0.1:8080", time.Now().UnixMilli())
			done := make(chan struct{})
			var wg sync.WaitGroup
			if live {
				wg.Go(func() {
					for {
						select {
						case <-done:
							return
						case <-time.After(300 * time.Millisecond):
						}
						data := fmt.Sprintf(`{"ip":"127.0.0.1","port":"8080","timestamp":%d}`, time.Now().UnixMilli())
						_, _ = conn.Set(node, []byte(data), -1)
					}
				})
			}
			defer func() { close(done); wg.Wait() }()
			o := options(t, addr, name, "8080")
			o.HeartbeatInterval = time.Second
			w, err := zkworker.Claim(context.Background(), o)
			if err != nil {
				t.Fatalf("Claim() = %v, want a claim held back while the node is watched", err)
			}
			defer w.Close(context.Background())
			// Held back a session timeout + margin; then it serves (the Java node stopped)
			// or loses the lease (the node was written meanwhile: a live Java Leaf).
			deadline := time.Now().Add(30 * time.Second)
			for w.Ready() != nil && !isClosed(w.Lost()) && time.Now().Before(deadline) {
				if !w.Expiry().Before(time.Now()) {
					t.Fatalf("Expiry() = %v while held back, want in the past", w.Expiry())
				}
				time.Sleep(20 * time.Millisecond)
			}
			err = w.Ready()
			if !live {
				if err != nil {
					t.Fatalf("Ready() over a Java node that stopped uploading = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, zkworker.ErrConflict) || !strings.Contains(err.Error(), "Java Leaf") {
				t.Fatalf("Ready() = %v, want %v naming a Java Leaf node", err, zkworker.ErrConflict)
			}
		})
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
