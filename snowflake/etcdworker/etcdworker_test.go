package etcdworker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-go/leaf/internal/etcdtest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// TestMain fails the package if a Worker's keepalive goroutine or its client outlives Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Short leases for the tests: TTL 4 s, keepalive every 1 s, stop 1 s early.
const (
	testTTL       = 4 * time.Second
	testKeepAlive = time.Second
	testMargin    = time.Second
)

// opts returns test Options on cluster c under a prefix of the test's own.
func opts(t *testing.T, c *etcdtest.Cluster) Options {
	return Options{
		Endpoints: c.Endpoints(),
		Prefix:    "/leaf-test/" + strings.ReplaceAll(t.Name(), "/", "_"),
		Owner:     t.Name(),
		MaxWorker: -1,
		TTL:       testTTL,
		Renew:     testKeepAlive,
		Margin:    testMargin,
		ClaimWait: -1,
	}
}

// claimT claims or fails the test, and closes the Worker at the end.
func claimT(t *testing.T, o Options) *Worker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := Claim(ctx, o)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// gen builds a generator on w, once a claim without a mark may serve (TTL + Margin after it).
func gen(t *testing.T, w *Worker) *snowflake.Generator {
	t.Helper()
	if err := w.WaitNoHistory(context.Background()); err != nil {
		t.Fatalf("WaitNoHistory: %v", err)
	}
	g, err := snowflake.New(context.Background(), snowflake.Settings{Source: w, ZeroStart: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// issue takes n IDs from g and adds them to seen, failing on a repeat.
func issue(t *testing.T, g *snowflake.Generator, n int, seen map[int64]bool) {
	t.Helper()
	for range n {
		id, err := g.Next(context.Background())
		if err != nil {
			t.Fatalf("worker %d: Next: %v", g.WorkerID(), err)
		}
		if seen[id] {
			t.Fatalf("duplicate ID %d", id)
		}
		seen[id] = true
	}
}

// crash stops w's keepalives and drops its connection without revoking the lease, as a killed
// process does.
func crash(w *Worker) {
	w.s.Stop()
	_ = w.cli.Close()
}

// suspendClock is the system clock whose boot clock is ahead by a jump: a host resumed after
// a suspend of that long, as Go's monotonic clock (which stood still) and the boot clock see it.
type suspendClock struct{ jump *atomic.Int64 }

func (c suspendClock) Now() time.Time      { return time.Now() }
func (c suspendClock) Boot() time.Duration { return lease.BootTime() + time.Duration(c.jump.Load()) }

// TestClaim: on one real cluster — three Workers in [5, 7] take 5, 6 and 7 and issue IDs that
// never repeat; a fourth finds none free and names the holders; Close frees an ID at once; a
// crashed holder's ID is taken only after its lease ran out in etcd; concurrent claimers never
// share an ID.
func TestClaim(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)

	t.Run("range", func(t *testing.T) {
		o := opts(t, c)
		o.MinWorker, o.MaxWorker = 5, 7
		seen := map[int64]bool{}
		var ws []*Worker
		for i := range 3 {
			o.Owner = "server-" + strconv.Itoa(i)
			w := claimT(t, o)
			if w.WorkerID() != int64(5+i) {
				t.Fatalf("claim %d got worker ID %d, want %d (lowest free)", i, w.WorkerID(), 5+i)
			}
			ws = append(ws, w)
			issue(t, gen(t, w), 2000, seen)
		}
		_, err := Claim(context.Background(), o)
		if !errors.Is(err, ErrNoFreeWorker) || !strings.Contains(err.Error(), "5 held by server-0") {
			t.Fatalf("fourth claim: %v, want ErrNoFreeWorker naming server-0", err)
		}
		// Close frees the ID at once.
		if err := ws[1].Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r, _ := cli.Get(context.Background(), ws[1].Key()); len(r.Kvs) != 0 {
			t.Fatalf("%s still there after Close", ws[1].Key())
		}
		w := claimT(t, o)
		if w.WorkerID() != 6 {
			t.Fatalf("after Close got %d, want 6", w.WorkerID())
		}
		issue(t, gen(t, w), 2000, seen)
		t.Logf("%d IDs, no repeat", len(seen))
	})

	t.Run("crash", func(t *testing.T) {
		o := opts(t, c)
		o.MaxWorker = 0
		// A tiny mark lead, so that what the successor waits for is the old lease.
		o.MarkAhead = time.Millisecond
		old := claimT(t, o)
		seen := map[int64]bool{}
		issue(t, gen(t, old), 1000, seen)
		crash(old)
		crashed := time.Now()
		o.ClaimWait = 3 * testTTL
		o.Owner = "successor"
		w := claimT(t, o)
		took := time.Since(crashed)
		// The old lease was last renewed at most testKeepAlive before the crash, so it ends at
		// least testTTL - testKeepAlive after it.
		if took < testTTL-testKeepAlive {
			t.Fatalf("successor claimed worker 0 %v after the crash, before the old lease (TTL %v) could have run out", took, testTTL)
		}
		issue(t, gen(t, w), 1000, seen)
		t.Logf("successor got worker 0 %v after the crash", took.Round(time.Millisecond))
	})

	t.Run("concurrent", func(t *testing.T) {
		o := opts(t, c)
		o.MaxWorker = 7
		const n = 8
		ids := make([]int64, n)
		errs := make([]error, n)
		ws := make([]*Worker, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ws[i], errs[i] = Claim(context.Background(), o)
				if errs[i] == nil {
					ids[i] = ws[i].WorkerID()
				}
			})
		}
		wg.Wait()
		got := map[int64]bool{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("claimer %d: %v", i, errs[i])
			}
			t.Cleanup(func() { _ = ws[i].Close(context.Background()) })
			if got[ids[i]] {
				t.Fatalf("worker ID %d claimed twice: %v", ids[i], ids)
			}
			got[ids[i]] = true
		}
	})
}

// TestLost: the lease revoked behind the Worker's back, or the claim key deleted, makes the
// loss final: Expiry is past, the generator refuses, Ready says why, Store fails — also after
// a successor has claimed the ID — and nothing comes back.
func TestLost(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	for _, how := range []string{"revoke", "delete"} {
		t.Run(how, func(t *testing.T) {
			o := opts(t, c)
			o.MaxWorker = 0
			w := claimT(t, o)
			g := gen(t, w)
			issue(t, g, 10, map[int64]bool{})
			switch how {
			case "revoke":
				if _, err := cli.Revoke(context.Background(), w.lease); err != nil {
					t.Fatal(err)
				}
			case "delete":
				if _, err := cli.Delete(context.Background(), w.Key()); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			waittest.For(t, 3*testKeepAlive, "the loss to be noticed", func() bool { return w.Ready() != nil && strings.Contains(w.Ready().Error(), "lost") })
			t.Logf("loss noticed after %v: %v", time.Since(start).Round(time.Millisecond), w.Ready())
			succ := claimT(t, o)
			if succ.WorkerID() != 0 {
				t.Fatalf("successor got %d", succ.WorkerID())
			}
			// Nothing comes back. Only time can tell: a lost Worker renews nothing, so no
			// count shows that a keepalive interval went by; watch two of them.
			waittest.Quiet(t, 2*testKeepAlive, "lost holder became ready again", func() bool {
				return w.Ready() == nil || !w.Expiry().Before(time.Now())
			})
			if _, err := g.Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
				t.Fatalf("lost holder's Next: %v, want ErrLeaseExpired", err)
			}
			if err := w.Store(context.Background(), time.Now().Add(time.Hour)); !errors.Is(err, ErrLost) {
				t.Fatalf("lost holder's Store: %v, want ErrLost", err)
			}
			if w.Ready() == nil || !w.Expiry().Before(time.Now()) {
				t.Fatal("lost holder became ready again")
			}
		})
	}
}

// TestHighWater: a successor loads the mark its predecessor stored, waits until its clock has
// passed it and issues only later IDs; a mark far ahead makes Claim take another free ID, and
// with none left Claim fails saying why; a Store is fenced by the claim.
func TestHighWater(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)

	t.Run("wait", func(t *testing.T) {
		o := opts(t, c)
		o.MaxWorker = 0
		w := claimT(t, o)
		// The keepalives keep the mark MarkAhead past the clock.
		waittest.For(t, 3*testKeepAlive, "a mark stored", func() bool {
			r, err := cli.Get(context.Background(), highWaterKey(o.Prefix, 0))
			return err == nil && len(r.Kvs) == 1
		})
		g := gen(t, w)
		last, _ := g.Next(context.Background())
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, err := cli.Get(context.Background(), highWaterKey(o.Prefix, 0))
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("mark after Close: %v %v", r, err)
		}
		mark, _ := strconv.ParseInt(string(r.Kvs[0].Value), 10, 64)
		// Make it 1.5 s ahead so that the successor has to wait.
		mark = max(mark, time.Now().Add(1500*time.Millisecond).UnixMilli())
		if _, err := cli.Put(context.Background(), highWaterKey(o.Prefix, 0), strconv.FormatInt(mark, 10)); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		succ := claimT(t, o)
		if now := time.Now().UnixMilli(); now <= mark {
			t.Fatalf("Claim returned at %d, before the mark %d", now, mark)
		}
		t.Logf("successor waited %v for the mark", time.Since(began).Round(time.Millisecond))
		id, err := gen(t, succ).Next(context.Background())
		if err != nil || id <= last {
			t.Fatalf("successor's first ID %d (%v), predecessor's last %d", id, err, last)
		}
		if got := snowflake.DefaultLayout().Decompose(id).Millis; got <= mark {
			t.Fatalf("successor issued at %d, not past the mark %d", got, mark)
		}
	})

	t.Run("close-lowers", func(t *testing.T) {
		o := opts(t, c)
		o.MaxWorker = 0
		w := claimT(t, o)
		g := gen(t, w)
		var last int64
		for range 1000 {
			id, err := g.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			last = id
		}
		// Wait for a keepalive to raise the mark MarkAhead (12 s) past the clock.
		var bg int64
		waittest.For(t, 3*testKeepAlive, "a background mark", func() bool {
			r, err := cli.Get(context.Background(), highWaterKey(o.Prefix, 0))
			if err != nil || len(r.Kvs) != 1 {
				return false
			}
			bg, _ = strconv.ParseInt(string(r.Kvs[0].Value), 10, 64)
			return bg > time.Now().Add(DefaultMarkAhead-2*time.Second).UnixMilli()
		})
		asked := g.Stats().HighWater.UnixMilli()
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, err := cli.Get(context.Background(), highWaterKey(o.Prefix, 0))
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("mark after Close: %v %v", r, err)
		}
		after, _ := strconv.ParseInt(string(r.Kvs[0].Value), 10, 64)
		lastMs := snowflake.DefaultLayout().Decompose(last).Millis
		if after != asked || after <= lastMs || after >= bg {
			t.Fatalf("mark after Close %d; want the generator's mark %d, above its last ID's ms %d and below the background mark %d",
				after, asked, lastMs, bg)
		}
		t.Logf("Close lowered the mark from %+v to %+v ahead of the last ID", time.Duration(bg-lastMs)*time.Millisecond, time.Duration(after-lastMs)*time.Millisecond)
	})

	// A graceful stop (Generator.Seal, then Close) leaves exactly the last issued ms + 1 in the
	// key, so that a restart issues at once (issue 15 item 6).
	t.Run("seal-exact", func(t *testing.T) {
		o := opts(t, c)
		o.MaxWorker = 0
		w := claimT(t, o)
		g := gen(t, w)
		var last int64
		for range 1000 {
			id, err := g.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			last = id
		}
		if err := g.Seal(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, err := cli.Get(context.Background(), highWaterKey(o.Prefix, 0))
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("mark after Close: %v %v", r, err)
		}
		after, _ := strconv.ParseInt(string(r.Kvs[0].Value), 10, 64)
		if want := snowflake.DefaultLayout().Decompose(last).Millis + 1; after != want {
			t.Fatalf("mark after Seal and Close %d, want the last ID's ms + 1 = %d", after, want)
		}
	})

	t.Run("far-ahead", func(t *testing.T) {
		o := opts(t, c)
		o.MaxWorker = 1
		o.MaxMarkWait = 5 * time.Second
		day := time.Now().Add(24 * time.Hour).UnixMilli()
		if _, err := cli.Put(context.Background(), highWaterKey(o.Prefix, 0), strconv.FormatInt(day, 10)); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		w := claimT(t, o)
		if w.WorkerID() != 1 {
			t.Fatalf("got worker %d, want 1 (0's mark is a day ahead)", w.WorkerID())
		}
		if time.Since(began) > 5*time.Second {
			t.Fatalf("Claim took %v", time.Since(began))
		}
		if r, _ := cli.Get(context.Background(), workerKey(o.Prefix, 0)); len(r.Kvs) != 0 {
			t.Fatal("worker 0 left claimed after it was given up")
		}
		o.MaxWorker = 0
		o.ClaimWait = time.Minute // waiting cannot help: Claim must fail at once
		began = time.Now()
		_, err := Claim(context.Background(), o)
		if !errors.Is(err, ErrNoFreeWorker) || !strings.Contains(err.Error(), "ahead of this clock") {
			t.Fatalf("claim of [0,0]: %v, want ErrNoFreeWorker saying the mark is ahead", err)
		}
		if took := time.Since(began); took > 10*time.Second {
			t.Fatalf("claim of [0,0] with only a far-ahead mark failed after %v, not at once", took)
		}
	})

	t.Run("store", func(t *testing.T) {
		o := opts(t, c)
		o.MaxWorker = 0
		o.MarkAhead = time.Millisecond
		w := claimT(t, o)
		target := time.Now().Add(time.Minute)
		if err := w.Store(context.Background(), target); err != nil {
			t.Fatal(err)
		}
		r, _ := cli.Get(context.Background(), highWaterKey(o.Prefix, 0))
		if got, _ := strconv.ParseInt(string(r.Kvs[0].Value), 10, 64); got < target.UnixMilli() {
			t.Fatalf("stored %d, want ≥ %d", got, target.UnixMilli())
		}
		// Another claim of the key (its CreateRevision changes) fences this Worker's writes.
		if _, err := cli.Delete(context.Background(), w.Key()); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(context.Background(), w.Key(), "intruder"); err != nil {
			t.Fatal(err)
		}
		if err := w.Store(context.Background(), target.Add(time.Minute)); !errors.Is(err, ErrLost) {
			t.Fatalf("fenced Store: %v, want ErrLost", err)
		}
		r, _ = cli.Get(context.Background(), highWaterKey(o.Prefix, 0))
		if got, _ := strconv.ParseInt(string(r.Kvs[0].Value), 10, 64); got >= target.Add(time.Minute).UnixMilli() {
			t.Fatal("the fenced Store wrote the mark")
		}
	})
}

// TestSuspend (issue 15 item 7): the boot clock jumps 30 s while the Clock's monotonic time does
// not (a suspended host): Expiry is past at once and the generator refuses; the next keepalive
// of the same lease (still alive in etcd here) makes it issue again.
func TestSuspend(t *testing.T) {
	c := etcdtest.Start(t)
	var jump atomic.Int64
	o := opts(t, c)
	o.MaxWorker = 0
	o.Clock = suspendClock{&jump}
	// No keepalive during the check, so that the refusal is the wall check's.
	o.TTL, o.Renew, o.Margin = 10*time.Second, 3*time.Second, 2*time.Second
	w := claimT(t, o)
	g := gen(t, w)
	issue(t, g, 10, map[int64]bool{})
	jump.Store(int64(30 * time.Second))
	// Expiry reads the boot clock at most every lease.BootRecheck of wall time: wait for
	// that, with a deadline.
	for deadline := time.Now().Add(time.Second); !w.Expiry().Before(time.Now()); {
		if time.Now().After(deadline) {
			t.Fatalf("Expiry %v a second after a 30 s suspend, want past", w.Expiry())
		}
		time.Sleep(lease.BootRecheck)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Fatalf("Next after a suspend: %v, want ErrLeaseExpired", err)
	}
	if err := w.Ready(); err == nil {
		t.Fatal("Ready nil after a suspend")
	}
	waittest.For(t, 2*o.Renew, "recovery after a keepalive", func() bool { return w.Ready() == nil })
	if _, err := g.Next(context.Background()); err != nil {
		t.Fatalf("Next after the keepalive: %v", err)
	}
}

// TestQuorumLoss: with the leader stopped the holders keep issuing; with a second member stopped
// (no quorum) no keepalive succeeds and each holder stops before TTL has passed since its last
// successful keepalive (so before etcd could grant its ID to anyone); with the members back the
// same leases recover and the holders issue again.
func TestQuorumLoss(t *testing.T) {
	c := etcdtest.Start(t)
	o := opts(t, c)
	o.MaxWorker = 1
	var ws []*Worker
	var gs []*snowflake.Generator
	seen := map[int64]bool{}
	for range 2 {
		w := claimT(t, o)
		ws = append(ws, w)
		gs = append(gs, gen(t, w))
	}
	lead := c.Leader(t)
	c.Member(lead).Stop()
	time.Sleep(testTTL) // longer than a lease: the keepalives must go through the new leader
	for _, g := range gs {
		issue(t, g, 100, seen)
	}
	second := c.Leader(t)
	c.Member(second).Stop()
	lost := time.Now()
	for i, w := range ws {
		last := w.LastHeartbeat()
		waittest.For(t, testTTL+testKeepAlive, "the holder to stop without quorum", func() bool { return w.Ready() != nil })
		stopped := time.Now()
		if _, err := gs[i].Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
			t.Fatalf("holder %d without quorum: Next %v, want ErrLeaseExpired", i, err)
		}
		if gap := stopped.Sub(last); gap >= testTTL {
			t.Fatalf("holder %d stopped %v after its last keepalive, not before the TTL %v", i, gap, testTTL)
		}
		t.Logf("holder %d stopped %v after quorum loss, %v after its last keepalive", i,
			stopped.Sub(lost).Round(time.Millisecond), stopped.Sub(last).Round(time.Millisecond))
	}
	c.Member(lead).Restart(t)
	c.Member(second).Restart(t)
	for i, w := range ws {
		start := time.Now()
		waittest.For(t, 30*time.Second, "recovery with quorum back", func() bool { return w.Ready() == nil })
		took := time.Since(start)
		issue(t, gs[i], 100, seen)
		t.Logf("holder %d issues again %v after quorum came back (same lease %s)", i, took.Round(time.Millisecond), leaseHex(w.lease))
	}
}

// TestPeerClock (issue 15 item 5): a live holder whose clock reads 30 s ahead makes a new
// claimer refuse to start, naming it; 2 s ahead passes; the check off (0) passes.
func TestPeerClock(t *testing.T) {
	c := etcdtest.Start(t)
	for _, tc := range []struct {
		ahead   time.Duration
		max     time.Duration
		refused bool
	}{{30 * time.Second, 10 * time.Second, true}, {2 * time.Second, 10 * time.Second, false}, {30 * time.Second, 0, false}} {
		t.Run(fmt.Sprintf("ahead=%v,max=%v", tc.ahead, tc.max), func(t *testing.T) {
			o := opts(t, c)
			o.MaxWorker = 3
			peer := o
			peer.Owner = "peer-ahead"
			peer.Clock = lease.WithBoot(func() time.Time { return time.Now().Add(tc.ahead) })
			claimT(t, peer)
			o.MaxPeerClockSkew = tc.max
			w, err := Claim(context.Background(), o)
			if tc.refused {
				if !errors.Is(err, snowflake.ErrPeerClockSkew) || !strings.Contains(err.Error(), "peer-ahead") {
					t.Fatalf("Claim: %v, want ErrPeerClockSkew naming peer-ahead", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = w.Close(context.Background())
		})
	}
}

// TestOptions: bad options are refused with ErrOptions before anything connects.
func TestOptions(t *testing.T) {
	good := Options{Endpoints: []string{"127.0.0.1:1"}, Prefix: "/p", MaxWorker: -1}
	for name, mod := range map[string]func(*Options){
		"no endpoints":    func(o *Options) { o.Endpoints = nil },
		"prefix":          func(o *Options) { o.Prefix = "p/" },
		"ttl fraction":    func(o *Options) { o.TTL = 2500 * time.Millisecond },
		"margin":          func(o *Options) { o.Margin = 20 * time.Second },
		"keepalive":       func(o *Options) { o.Renew = 9 * time.Second },
		"min above max":   func(o *Options) { o.MinWorker, o.MaxWorker = 5, 4 },
		"max past layout": func(o *Options) { o.MaxWorker = 1024 },
		"negative min":    func(o *Options) { o.MinWorker = -1 },
		"cert alone":      func(o *Options) { o.CertFile = "x.pem" },
	} {
		o := good
		mod(&o)
		if _, err := Claim(context.Background(), o); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: %v, want ErrOptions", name, err)
		}
	}
}

// TestPrefixDeleted (issue 20 item 4): `etcdctl del --prefix` of the namespace while A holds
// worker 0, and B claims at once. B finds neither a claim key nor a mark, so it takes worker 0
// and is held back TTL + Margin; A's next keepalive finds its key gone or re-created and loses
// the claim for good, long before B serves. Before this, B issued at once while A went on
// issuing until its next keepalive: duplicates.
func TestPrefixDeleted(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	o := opts(t, c)
	o.MaxWorker = 0
	o.Owner = "holder-a"
	a := claimT(t, o)
	ga := gen(t, a)
	seen := map[int64]bool{}
	issue(t, ga, 100, seen)
	if _, err := cli.Delete(context.Background(), o.Prefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	o.Owner = "claimer-b"
	b := claimT(t, o)
	if b.WorkerID() != a.WorkerID() {
		t.Fatalf("B got worker %d, want A's %d (the case under test)", b.WorkerID(), a.WorkerID())
	}
	if err := b.Ready(); err == nil || !strings.Contains(err.Error(), "no history") {
		t.Fatalf("B's Ready right after its claim: %v, want held back: no history", err)
	}
	if exp := b.Expiry(); !exp.Equal(lease.Expired) {
		t.Fatalf("B's Expiry right after its claim: %v, want %v", exp, lease.Expired)
	}
	waittest.For(t, 3*testTTL, "A to lose its claim after the prefix was deleted", func() bool { return a.Err() != nil })
	if err := a.Err(); !errors.Is(err, lease.ErrLeaseLost) || !errors.Is(err, ErrLost) {
		t.Fatalf("A's Err: %v, want %v and %v", err, lease.ErrLeaseLost, ErrLost)
	}
	if _, err := ga.Next(context.Background()); !errors.Is(err, snowflake.ErrLeaseExpired) {
		t.Fatalf("A's Next after the loss: %v, want ErrLeaseExpired", err)
	}
	issue(t, gen(t, b), 100, seen)
	if b.Err() != nil {
		t.Fatalf("B lost its claim: %v", b.Err())
	}
}

// TestLiveWorkers: LiveWorkers lists the claimed IDs of the range, the caller's included, and
// not an ID whose holder has closed (its key is gone with its lease).
func TestLiveWorkers(t *testing.T) {
	c := etcdtest.Start(t)
	o := opts(t, c)
	o.MinWorker, o.MaxWorker = 3, 6
	a := claimT(t, o)
	b := claimT(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := a.LiveWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint([]int64{a.WorkerID(), b.WorkerID()}); fmt.Sprint(got) != want {
		t.Errorf("LiveWorkers with two holders = %v, want %s", got, want)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = a.LiveWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint([]int64{a.WorkerID()}); fmt.Sprint(got) != want {
		t.Errorf("LiveWorkers after the second holder closed = %v, want %s", got, want)
	}
}
