package k8sworker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/leaf-go/leaf/internal/k8stest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/snowflake/k8sworker"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// Short leases keep the tests quick; the rules do not depend on the length.
const (
	testDuration = 3 * time.Second
	testRenew    = 400 * time.Millisecond
	testMargin   = time.Second
)

// bed is one API server and a namespace holding the base's ServiceAccount and Role
// (deploy/kubernetes/base), with a client authenticated as that service account: the tests
// run with exactly the permissions the manifests grant.
type bed struct {
	c   *k8stest.Cluster
	ns  string
	cli *k8sworker.Client
}

func newBed(t *testing.T) *bed {
	t.Helper()
	c := k8stest.Start(t)
	ns := c.Namespace(t)
	_, file, _, _ := runtime.Caller(0)
	base := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "kubernetes", "base")
	for _, f := range []string{"serviceaccount.yaml", "role.yaml"} {
		c.Kubectl(t, "", "apply", "-n", ns, "-f", filepath.Join(base, f))
	}
	token := c.ServiceAccountToken(t, ns, "leaf-go")
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig(t, token, ns))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := k8sworker.NewClient(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &bed{c: c, ns: ns, cli: cli}
}

// opts returns Options for a claimer named name in [0, max] preferring preferred.
func (b *bed) opts(name string, preferred, max int64) k8sworker.Options {
	return k8sworker.Options{Client: b.cli, Namespace: b.ns, Prefix: "leaf-go-worker-", Identity: name,
		Preferred: preferred, MinWorker: 0, MaxWorker: max,
		LeaseDuration: testDuration, Renew: testRenew, Margin: testMargin, MarkAhead: 3 * time.Second,
		MaxMarkWait: 10 * time.Second}
}

// holder reads a Lease's holder identity and mark annotation with kubectl (as the admin).
func (b *bed) holder(t *testing.T, id int64) (string, int64) {
	t.Helper()
	out := b.c.Kubectl(t, "", "get", "lease", "leaf-go-worker-"+strconv.FormatInt(id, 10), "-n", b.ns, "-o",
		`jsonpath={.spec.holderIdentity}{"|"}{.metadata.annotations.leaf-go/high-water-ms}`)
	h, m, _ := strings.Cut(out, "|")
	ms, _ := strconv.ParseInt(m, 10, 64)
	return h, ms
}

func claim(t *testing.T, o k8sworker.Options) *k8sworker.Worker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := k8sworker.Claim(ctx, o)
	if err != nil {
		t.Fatalf("Claim(%s): %v", o.Identity, err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// TestWorker runs the rules of the package doc against a real API server, with a client
// that has only the base Role's permissions.
func TestWorker(t *testing.T) {
	b := newBed(t)

	t.Run("claim without history is held back, preferred then lowest free", func(t *testing.T) {
		began := time.Now()
		a := claim(t, b.opts("a", 2, 3))
		if a.WorkerID() != 2 {
			t.Errorf("a: worker ID %d, want its preferred 2", a.WorkerID())
		}
		// The Lease did not exist: a deleted Lease's holder may still issue, so no IDs until
		// the lease duration + margin have passed.
		if err := a.Ready(); err == nil || a.Expiry().After(time.Now()) {
			t.Errorf("a right after a claim without history: Ready %v, Expiry %v; want held back", err, a.Expiry())
		}
		waittest.For(t, 3*testDuration, "a to serve", func() bool { return a.Ready() == nil })
		if took := time.Since(began); took < testDuration+testMargin {
			t.Errorf("a claim of a Lease that did not exist served after %v, want at least the lease duration + margin %v", took, testDuration+testMargin)
		}
		if !time.Now().Before(a.Expiry()) {
			t.Errorf("a: Expiry %v after it became ready", a.Expiry())
		}
		// b prefers 2 too: a holds it, so b takes the lowest free ID.
		bw := claim(t, b.opts("b", 2, 3))
		if bw.WorkerID() != 0 {
			t.Errorf("b: worker ID %d with 2 held, want the lowest free 0", bw.WorkerID())
		}
		if h, _ := b.holder(t, 2); h != "a" {
			t.Errorf("lease 2 held by %q, want a", h)
		}
		ids, err := a.LiveWorkers(t.Context())
		if err != nil || len(ids) != 2 {
			t.Errorf("LiveWorkers = %v, %v; want 2 and 0", ids, err)
		}
		// The rest of the range, then none.
		claim(t, b.opts("c", -1, 3))
		claim(t, b.opts("d", -1, 3))
		o := b.opts("e", -1, 3)
		_, err = k8sworker.Claim(t.Context(), o)
		if !errors.Is(err, k8sworker.ErrNoFreeWorker) {
			t.Errorf("a fifth claim on 4 IDs: %v, want ErrNoFreeWorker", err)
		}
	})

	t.Run("release hands the ID and the mark on", func(t *testing.T) {
		o := b.opts("r1", 5, 6)
		o.MinWorker = 5
		r1 := claim(t, o)
		mark := time.Now().Add(200 * time.Millisecond)
		if err := r1.Store(t.Context(), mark); err != nil {
			t.Fatal(err)
		}
		if err := r1.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if h, m := b.holder(t, 5); h != "" || m != mark.UnixMilli() {
			t.Errorf("after Close lease 5 held by %q with mark %d, want released with the last mark %d", h, m, mark.UnixMilli())
		}
		if !r1.Expiry().Before(time.Now()) {
			t.Error("Expiry after Close is not past")
		}
		o.Identity = "r2"
		r2 := claim(t, o)
		if r2.WorkerID() != 5 {
			t.Errorf("successor took %d, want the released 5", r2.WorkerID())
		}
		floor, _ := r2.Load(t.Context())
		if floor.UnixMilli() != mark.UnixMilli() || !time.Now().After(floor) {
			t.Errorf("successor's floor %v, want the released mark %v, passed", floor, mark)
		}
	})

	t.Run("a deleted Lease is lost for good", func(t *testing.T) {
		o := b.opts("del", 7, 7)
		o.MinWorker = 7
		w := claim(t, o)
		waittest.For(t, 3*testDuration, "the claim to serve", func() bool { return w.Ready() == nil })
		b.c.Kubectl(t, "", "delete", "lease", "leaf-go-worker-7", "-n", b.ns)
		select {
		case <-w.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("deleting the Lease did not make the claim lost")
		}
		if err := w.Ready(); err == nil || !strings.Contains(err.Error(), "deleted") {
			t.Errorf("Ready after the delete = %v, want lost: deleted", err)
		}
		if !w.Expiry().Before(time.Now()) {
			t.Error("Expiry after the loss is not past")
		}
		if err := w.Store(t.Context(), time.Now().Add(time.Hour)); !errors.Is(err, k8sworker.ErrLost) || !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("Store after the loss = %v, want ErrLost and lease.ErrLeaseLost", err)
		}
	})

	t.Run("a Lease taken over is lost for good", func(t *testing.T) {
		o := b.opts("victim", 8, 8)
		o.MinWorker = 8
		w := claim(t, o)
		b.c.Kubectl(t, "", "patch", "lease", "leaf-go-worker-8", "-n", b.ns, "--type", "merge", "-p", `{"spec":{"holderIdentity":"intruder"}}`)
		select {
		case <-w.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("another holder's write did not make the claim lost")
		}
		if err := w.Ready(); err == nil || !strings.Contains(err.Error(), "intruder") {
			t.Errorf("Ready = %v, want lost to intruder", err)
		}
		if h, _ := b.holder(t, 8); h != "intruder" {
			t.Errorf("lease 8 held by %q after the loss, want intruder (the lost holder must not write again)", h)
		}
	})

	t.Run("API server away: stop before expiry, resume on return", func(t *testing.T) {
		o := b.opts("away", 9, 9)
		o.MinWorker = 9
		w := claim(t, o)
		waittest.For(t, 3*testDuration, "the claim to serve", func() bool { return w.Ready() == nil })
		b.c.StopAPIServer()
		waittest.For(t, 3*testDuration, "Expiry to pass with the API server down", func() bool { return !time.Now().Before(w.Expiry()) })
		if err := w.Ready(); err == nil {
			t.Error("Ready with the lease lapsed = nil")
		}
		b.c.StartAPIServer(t)
		waittest.For(t, 30*time.Second, "a renewal after the API server's return", func() bool { return w.Ready() == nil })
		select {
		case <-w.Lost():
			t.Error("the claim was lost, want it resumed")
		default:
		}
		if h, _ := b.holder(t, 9); h != "away" {
			t.Errorf("lease 9 held by %q, want away", h)
		}
	})
}

// TestOptions: bad Options are refused with ErrOptions before any request.
func TestOptions(t *testing.T) {
	tests := []struct {
		name string
		give func(*k8sworker.Options)
	}{
		{"no client", func(o *k8sworker.Options) { o.Client = nil }},
		{"no namespace", func(o *k8sworker.Options) { o.Namespace = "" }},
		{"upper-case prefix", func(o *k8sworker.Options) { o.Prefix = "Leaf-" }},
		{"duration not whole seconds", func(o *k8sworker.Options) { o.LeaseDuration = 2500 * time.Millisecond }},
		{"renew past duration - margin", func(o *k8sworker.Options) { o.Renew = 14 * time.Second }},
		{"range outside the layout", func(o *k8sworker.Options) { o.MaxWorker = 1024 }},
		{"min above max", func(o *k8sworker.Options) { o.MinWorker, o.MaxWorker = 5, 4 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := k8sworker.Options{Client: fakeClient(t), Namespace: "ns", Prefix: "leaf-", MaxWorker: -1}
			tt.give(&o)
			if _, err := k8sworker.Claim(t.Context(), o); !errors.Is(err, k8sworker.ErrOptions) {
				t.Errorf("Claim = %v, want ErrOptions", err)
			}
		})
	}
}

// fakeClient is a Client for an address nothing listens on: TestOptions must fail before
// any request.
func fakeClient(t *testing.T) *k8sworker.Client {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("https://127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := k8sworker.NewClient(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// TestEnvironment: the identity, namespace, preferred ID and prefix conventions.
func TestEnvironment(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if a, b := k8sworker.Identity(env(map[string]string{"POD_NAME": "leaf-go-3"})), k8sworker.Identity(env(map[string]string{"POD_NAME": "leaf-go-3"})); a == b || !strings.HasPrefix(a, "leaf-go-3_") {
		t.Errorf("Identity of two processes of pod leaf-go-3: %q, %q; want distinct, starting leaf-go-3_", a, b)
	}
	host, _ := os.Hostname()
	if id := k8sworker.Identity(env(nil)); !strings.HasPrefix(id, host+"_") {
		t.Errorf("Identity without POD_NAME = %q, want the hostname %q first", id, host)
	}
	if ns := k8sworker.Namespace(env(map[string]string{"POD_NAMESPACE": "ids"})); ns != "ids" {
		t.Errorf("Namespace with POD_NAMESPACE=ids = %q", ns)
	}
	prefs := []struct {
		give map[string]string
		min  int64
		want int64
	}{
		{map[string]string{"POD_INDEX": "4", "POD_NAME": "leaf-go-7"}, 0, 4},
		{map[string]string{"POD_NAME": "leaf-go-7"}, 100, 107},
		{map[string]string{"POD_NAME": "leaf-go-abcde"}, 0, -1},
		{map[string]string{}, 0, -1},
		{map[string]string{"POD_INDEX": "x", "POD_NAME": "leaf-go-2"}, 10, 12},
	}
	for _, tt := range prefs {
		if got := k8sworker.Preferred(env(tt.give), tt.min); got != tt.want {
			t.Errorf("Preferred(%v, min %d) = %d, want %d", tt.give, tt.min, got, tt.want)
		}
	}
	for give, want := range map[string]string{
		"com.sankuai.leaf.opensource.test": "com.sankuai.leaf.opensource.test-worker-",
		"Orders_Prod":                      "orders-prod-worker-",
		"///":                              "leaf-worker-",
	} {
		if got := k8sworker.DefaultPrefix(give); got != want {
			t.Errorf("DefaultPrefix(%q) = %q, want %q", give, got, want)
		}
	}
}
