package zkworker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/snowflake/zkworker"
)

// forwarder is a TCP forwarder on loopback that can stop forwarding (a partition: the
// connections stay open, nothing passes) and start again. The fault proxy of the fault campaign
// (internal/testing/faultproxy) lives in the test module; this package's tests need only this.
type forwarder struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex // guards blocked and conns
	blocked bool
	cond    *sync.Cond
	conns   []net.Conn
}

// forward listens on addr (":0" style loopback when empty) and forwards to upstream until the
// test ends.
func forward(t *testing.T, addr, upstream string) *forwarder {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, upstream: upstream}
	f.cond = sync.NewCond(&f.mu)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, u)
			f.mu.Unlock()
			wg.Go(func() { f.pipe(u, c) })
			wg.Go(func() { f.pipe(c, u) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		f.blocked = false
		for _, c := range f.conns {
			c.Close()
		}
		f.cond.Broadcast()
		f.mu.Unlock()
		wg.Wait()
	})
	return f
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

// pipe copies src to dst, holding each chunk while the forwarder is blocked.
func (f *forwarder) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.mu.Lock()
			for f.blocked {
				f.cond.Wait()
			}
			f.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			dst.Close()
			return
		}
	}
}

// block stops forwarding (data is held, not dropped); unblock forwards again.
func (f *forwarder) block() { f.mu.Lock(); f.blocked = true; f.mu.Unlock() }
func (f *forwarder) unblock() {
	f.mu.Lock()
	f.blocked = false
	f.cond.Broadcast()
	f.mu.Unlock()
}

// TestLeaseLapsesWithoutZooKeeper: the session is the lease. Cut off from ZooKeeper (the
// forwarder holds every byte), the holder stops backing IDs once the session timeout − margin
// has passed since its last contact (Expiry in the past, Ready says the lease lapsed) although
// no callback or error has come, and backs IDs again when the same session answers (cut off
// for less than the session timeout). Without the contact deadline (landed main) it kept
// issuing with Ready nil.
func TestLeaseLapsesWithoutZooKeeper(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	fw := forward(t, "", addr)
	o := options(t, fw.addr(), zktest.Name(t, addr), "8080")
	o.SessionTimeout, o.Margin = 6*time.Second, 4*time.Second // the lease backs IDs 2 s after a contact
	w := claim(t, o)
	g, err := snowflake.New(context.Background(), snowflake.Settings{Source: w})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Next(context.Background()); err != nil {
		t.Fatalf("Next() before the partition = %v", err)
	}
	session := w.Status().State
	fw.block()
	cut := time.Now()
	waittest.For(t, 10*time.Second, "Ready() reports the lapsed lease", func() bool { return w.Ready() != nil })
	lapsed := time.Now()
	if d := lapsed.Sub(cut); d > o.SessionTimeout-o.Margin+time.Second {
		t.Errorf("lapsed %v after the partition, want within the session timeout − margin (%v) and a contact interval", d, o.SessionTimeout-o.Margin)
	}
	if err := w.Ready(); !strings.Contains(err.Error(), "lease") || errors.Is(err, zkworker.ErrConflict) || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("Ready() = %v, want a lapsed (not lost) lease", err)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Errorf("Next() while cut off = %v, want %v", err, snowflake.ErrLeaseExpired)
	}
	time.Sleep(time.Until(cut.Add(3 * time.Second))) // cut off 3 s: the session (6 s) survives
	fw.unblock()
	waittest.For(t, 15*time.Second, "Ready() nil again on the same session", func() bool { return w.Ready() == nil })
	if _, err := g.Next(context.Background()); err != nil {
		t.Errorf("Next() after the same session answered = %v", err)
	}
	select {
	case <-w.Lost():
		t.Errorf("Lost() closed after a partition shorter than the session timeout (session %s)", session)
	default:
	}
}

// TestLeaseLostWithNewSession: cut off past the session timeout, the holder's session expires
// at ZooKeeper (its live node goes); when the connection heals, go-zookeeper gets a new
// session, and the lease is lost for good (Curator's rule: a new session means the claim is
// lost), although the live node could be created again.
func TestLeaseLostWithNewSession(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	fw := forward(t, "", addr)
	name := zktest.Name(t, addr)
	o := options(t, fw.addr(), name, "8080")
	w := claim(t, o)
	conn := zktest.Conn(t, addr)
	live := fmt.Sprintf("/snowflake/%s/live/%d", name, w.WorkerID())
	if ok, _, err := conn.Exists(live); err != nil || !ok {
		t.Fatalf("live node %s of the claim: exists %v, %v", live, ok, err)
	}
	fw.block()
	waittest.For(t, 10*time.Second, "lapsed", func() bool { return w.Ready() != nil })
	// ZooKeeper expires the session: it deletes the holder's live node (an ephemeral of
	// that session) when it does. Wait for that, not for a fixed time.
	waittest.For(t, 30*time.Second, "ZooKeeper expiring the session (its live node gone)", func() bool {
		ok, _, err := conn.Exists(live)
		return err == nil && !ok
	})
	fw.unblock()
	waittest.For(t, 30*time.Second, "Lost() closed", func() bool {
		select {
		case <-w.Lost():
			return true
		default:
			return false
		}
	})
	if err := w.Ready(); !errors.Is(err, zkworker.ErrConflict) || !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("Ready() = %v, want %v and %v", err, zkworker.ErrConflict, lease.ErrLeaseLost)
	}
	if !w.Expiry().Before(time.Now()) {
		t.Errorf("Expiry() = %v after the loss, want in the past", w.Expiry())
	}
}

// TestClaimWaitsOutPreviousHolder: a claim that may follow a live holder serves only after a
// full session timeout + margin: a new address's node (no history: ZooKeeper may have lost a
// running server's node), and a live node that vanished (its holder's session expired, or the
// node was deleted while the holder ran). A restart of the same address after a graceful
// Close (no live node, the /forever node last written by this address) claims at once.
func TestClaimWaitsOutPreviousHolder(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	o := options(t, addr, name, "8080")
	want := o.SessionTimeout + o.Margin

	t0 := time.Now()
	w := claim(t, o) // waits until ready
	if took := time.Since(t0); took < want {
		t.Errorf("claim without history served after %v, want at least the session timeout + margin %v", took, want)
	}
	// A graceful shutdown: the exact mark goes to the cache file and the node.
	if err := w.StoreFinal(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	w.Close(context.Background())

	t0 = time.Now()
	w = claim(t, o)
	if took := time.Since(t0); took >= want {
		t.Errorf("restart after a graceful Close served after %v, want no takeover wait (%v)", took, want)
	}

	// The live node deleted while w runs: a replacement on the same address (its own cache
	// dir: a force-deleted pod's successor) waits, and w finds the live node gone and stops.
	mark := time.Now().Add(time.Second)
	if err := w.Store(context.Background(), mark); err != nil { // an upload follows at once
		t.Fatal(err)
	}
	waittest.For(t, 10*time.Second, "the mark uploaded", func() bool { return !w.Status().Uploaded.Before(mark.Truncate(time.Millisecond)) })
	if err := zktest.Conn(t, addr).Delete(fmt.Sprintf("/snowflake/%s/live/%d", name, w.WorkerID()), -1); err != nil {
		t.Fatal(err)
	}
	r := o
	r.CacheDir = t.TempDir()
	t0 = time.Now()
	w2 := claim(t, r)
	if took := time.Since(t0); took < want {
		t.Errorf("claim after a vanished live node served after %v, want at least %v", took, want)
	}
	if w2.WorkerID() != w.WorkerID() {
		t.Errorf("replacement got worker %d, want %d", w2.WorkerID(), w.WorkerID())
	}
	if err := w.Ready(); !errors.Is(err, zkworker.ErrConflict) {
		t.Errorf("holder whose live node was deleted: Ready() = %v after the replacement's claim, want %v", err, zkworker.ErrConflict)
	}
}

// TestCacheStartRegisters: with CacheStart a worker started while ZooKeeper is unreachable
// serves its cached worker ID (Expiry far ahead), registers its live node as soon as ZooKeeper
// answers and is a lease from then on; when another process holds the live node by then, it
// stops for good (Lost).
func TestCacheStartRegisters(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	tests := []struct {
		name     string
		conflict bool
	}{
		{name: "free", conflict: false},
		{name: "held by a replacement", conflict: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := zktest.Name(t, addr)
			o := options(t, addr, name, "8080")
			first := claim(t, o)
			id := first.WorkerID()
			// A graceful shutdown (leaf-server seals): the exact mark in the cache file and the node.
			if err := first.StoreFinal(context.Background(), time.Now()); err != nil {
				t.Fatal(err)
			}
			first.Close(context.Background())

			if tt.conflict { // a replacement on our address holds the worker ID
				r := o
				r.CacheDir = t.TempDir()
				claim(t, r)
			}
			down := o
			down.CacheStart = true
			down.ConnectTimeout = 300 * time.Millisecond
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			down.Servers = []string{ln.Addr().String()}
			ln.Close() // nothing listens: ZooKeeper unreachable
			w, err := zkworker.Claim(context.Background(), down)
			if err != nil {
				t.Fatalf("Claim() with CacheStart and ZooKeeper unreachable = %v", err)
			}
			defer w.Close(context.Background())
			if w.WorkerID() != id || w.Status().Source != zkworker.SourceCache || w.Expiry().Year() != 9999 || w.Ready() != nil {
				t.Fatalf("cache start: worker %d from %q, Expiry %v, Ready %v; want %d from the cache, year 9999, nil",
					w.WorkerID(), w.Status().Source, w.Expiry(), w.Ready(), id)
			}
			forward(t, down.Servers[0], addr) // ZooKeeper answers
			if tt.conflict {
				waittest.For(t, 30*time.Second, "Lost() closed", func() bool {
					select {
					case <-w.Lost():
						return true
					default:
						return false
					}
				})
				if err := w.Ready(); !errors.Is(err, zkworker.ErrConflict) || !strings.Contains(err.Error(), "cache-file start") {
					t.Errorf("Ready() = %v, want %v naming the cache-file start", err, zkworker.ErrConflict)
				}
				return
			}
			waittest.For(t, 30*time.Second, "registered (a lease)", func() bool { return w.Expiry().Year() != 9999 })
			if err := w.Ready(); err != nil {
				t.Errorf("Ready() after registering = %v", err)
			}
			held, _, err := zktest.Conn(t, addr).Get(fmt.Sprintf("/snowflake/%s/live/%d", name, id))
			if err != nil || !strings.Contains(string(held), "127.0.0.1:8080") {
				t.Errorf("live node after registering: %s, %v", held, err)
			}
		})
	}
}
