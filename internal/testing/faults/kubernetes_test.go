package faults

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/k8stest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/snowflake"
)

// k8sDuration is leaf-server's default Lease duration (--kubernetes-lease-duration).
const k8sDuration = 15 * time.Second

// TestKubernetesWorkerIDs: snowflake worker IDs from Kubernetes Leases (--worker-id-source
// kubernetes) on a real kube-apiserver (internal/k8stest, `make k8s`), each server a "pod"
// (POD_NAME, POD_NAMESPACE) whose token is bound only to the base Role of deploy/kubernetes:
// least privilege is what the servers run with. Under load, with every ID collected:
//
//   - kill -9 of a holder and a same-named replacement at once: the replacement does not
//     take the live-looking Lease, it takes a free ID;
//   - SIGSTOP of a holder past the lease duration, a same-named replacement (a force-deleted
//     pod's successor) takes its ID, then SIGCONT: the paused holder issues nothing more with
//     that ID; its claim is lost and it claims another ID by itself, without a restart;
//   - the API server down 20 s: every holder stops before its lease runs out, and serves
//     again without a restart within 30 s of the API server's return;
//   - the Lease deleted by hand: that claim is lost at the next renewal; the holder claims
//     again by itself, and the new Lease (no mark) is held back LeaseDuration + margin;
//   - SIGTERM: the holder releases its Lease and a new server takes the ID without waiting
//     out the lease duration, above the released mark.
//
// 0 duplicates across every server.
func TestKubernetesWorkerIDs(t *testing.T) {
	t.Parallel()
	c := k8stest.Start(t)
	ns := c.Namespace(t)
	_, file, _, _ := runtime.Caller(0)
	base := filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "kubernetes", "base")
	for _, f := range []string{"serviceaccount.yaml", "role.yaml"} {
		c.Kubectl(t, "", "apply", "-n", ns, "-f", filepath.Join(base, f))
	}
	kubeconfig := c.Kubeconfig(t, c.ServiceAccountToken(t, ns, "leaf-go"), ns)
	args := []string{"--segment=false", "--worker-id-source", "kubernetes", "--leaf-name", "leaf-go",
		"--worker-id-min", "10", "--worker-id-max", "13"}
	startPod := func(pod string) *servertest.Proc {
		return servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args, StartTimeout: 90 * time.Second,
			Env: []string{"KUBECONFIG=" + kubeconfig, "POD_NAMESPACE=" + ns, "POD_NAME=" + pod}})
	}
	holder := func(id int64) string {
		return c.Kubectl(t, "", "get", "lease", "leaf-go-worker-"+strconv.FormatInt(id, 10), "-n", ns, "-o", "jsonpath={.spec.holderIdentity}")
	}
	cmd := "make k8s (go test -race -count=1 -run '^TestKubernetesWorkerIDs$' ./faults/)"
	var all []*tally
	load := func(p *servertest.Proc) (*tally, func()) {
		tl := newTally(time.Second+slack, 10*time.Second)
		all = append(all, tl)
		return tl, sfSingles(func() *servertest.Proc { return p }, tl, 2, nil)
	}

	// Pods leaf-go-0 and leaf-go-1 prefer 10 and 11 (ordinal + --worker-id-min).
	a := startPod("leaf-go-0")
	b := startPod("leaf-go-1")
	wa, wb := status(t, a).WorkerID, status(t, b).WorkerID
	if wa != 10 || wb != 11 {
		t.Fatalf("leaf-go-0 and leaf-go-1 took worker IDs %d and %d, want their ordinals plus 10: 10 and 11", wa, wb)
	}
	// Fresh Leases have no mark: each claim is held back LeaseDuration + margin (17 s)
	// before it serves. Load starts once both serve, so that the kill hits a busy holder.
	claimWait := 2*k8sDuration + 30*time.Second
	waitReadyz(t, a, claimWait)
	waitReadyz(t, b, claimWait)
	ta, stopA := load(a)
	tb, stopB := load(b)

	// kill -9 A; a same-named replacement starts at once.
	time.Sleep(2 * time.Second)
	stopA()
	a.Kill9()
	a2 := startPod("leaf-go-0")
	wa2 := status(t, a2).WorkerID
	if wa2 == wa {
		t.Errorf("the replacement of the killed leaf-go-0 took its worker ID %d while that Lease still looked held", wa)
	}
	ta2, stopA2 := load(a2)
	a2Ready := waitReadyz(t, a2, claimWait)
	time.Sleep(2 * time.Second)
	if ta.idCount() == 0 || ta2.idCount() == 0 {
		t.Errorf("kill -9 round: the killed holder issued %d IDs and its replacement %d; want both under load", ta.idCount(), ta2.idCount())
	}
	r := check(t, mergeTallies(ta, tb, ta2), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "5 Kubernetes worker IDs", cmd, "n/a"
	r.Size = "2 pods in [10, 13]; leaf-go-0 killed -9, a same-named replacement started at once"
	r.Note = fmt.Sprintf("leaf-go-0 held %d (%d IDs before the kill); its replacement took %d (the killed pod's Lease was still live), served %v after its start (a new Lease: no mark, held back 17 s)",
		wa, ta.idCount(), wa2, a2Ready.Round(time.Millisecond))
	report.add(t, r)

	// SIGSTOP B past the lease duration; a same-named replacement takes its ID; SIGCONT B.
	stopB()
	if err := b.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	time.Sleep(k8sDuration + 2*time.Second)
	b2 := startPod("leaf-go-1")
	wb2 := status(t, b2).WorkerID
	if wb2 != wb {
		t.Errorf("the replacement of the paused leaf-go-1 took %d, want the lapsed %d", wb2, wb)
	}
	tb2, stopB2 := load(b2)
	if err := b.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// After SIGCONT: its lease ran out on its own clocks while it was stopped, so it
	// issues nothing with wb; its next renewal finds the Lease taken over (409), the claim
	// is lost, and the supervisor claims again by itself: another worker ID.
	tbAfter, stopBAfter := load(b)
	resumed := waitReadyz(t, b, 2*k8sDuration+30*time.Second)
	wbAfter := status(t, b).WorkerID
	// Serving again: wait for its first ID on the new claim, not a fixed time.
	waittest.For(t, 30*time.Second, "leaf-go-1 issuing on its new claim", func() bool { return tbAfter.idCount() > 0 })
	stopBAfter()
	if wbAfter == wb || wbAfter == wb2 || wbAfter == wa2 {
		t.Errorf("leaf-go-1 after SIGCONT claimed worker ID %d again; want one no live server holds (not %d, %d, %d)", wbAfter, wb, wb2, wa2)
	}
	var withOld int
	afterIDs, _, _, _ := tbAfter.snapshot()
	for _, id := range afterIDs {
		if snowflake.Decompose(id).Worker == wb {
			withOld++
		}
	}
	if withOld > 0 {
		t.Errorf("leaf-go-1 answered %d snowflake IDs with worker ID %d after SIGCONT, with that ID taken over", withOld, wb)
	}
	if tbAfter.idCount() == 0 {
		t.Errorf("leaf-go-1 issued no ID after its re-claim (worker %d → %d): it should serve again without a restart", wb, wbAfter)
	}
	r = check(t, mergeTallies(tb, tbAfter, tb2, ta2), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "5 Kubernetes worker IDs", cmd, "paused holder: that claim lost; claims again by itself"
	r.Size = fmt.Sprintf("leaf-go-1 SIGSTOPped %v (lease 15 s), a same-named replacement started, then SIGCONT", time.Since(paused).Round(time.Second))
	r.Note = fmt.Sprintf("the replacement took %d; the paused holder after SIGCONT: 0 IDs with %d, ready again %v later on worker ID %d (%d IDs)",
		wb2, wb, resumed.Round(time.Millisecond), wbAfter, tbAfter.idCount())
	report.add(t, r)
	b.Kill9()

	// The API server down 20 s with A2 and B2 under load.
	stopA2()
	stopB2()
	holders := []*servertest.Proc{a2, b2}
	qt := make([]*tally, len(holders))
	var stops []func()
	for i, p := range holders {
		var stop func()
		qt[i], stop = load(p)
		stops = append(stops, stop)
		qt[i].startFault()
	}
	c.StopAPIServer()
	down := time.Now()
	var fails []string
	for i, tl := range qt {
		f := tl.waitFirstErr(t, 2*k8sDuration)
		if f >= k8sDuration {
			t.Errorf("holder %d stopped issuing %v after the API server went down, not before the lease duration %v", i, f, k8sDuration)
		}
		fails = append(fails, f.Round(time.Millisecond).String())
	}
	time.Sleep(time.Until(down.Add(20 * time.Second)))
	for i, tl := range qt {
		if n, ex := issuedAfter(tl, tl.firstErrAt()); n > 0 {
			t.Errorf("holder %d issued %d IDs after its first refusal with the API server down, e.g. %d", i, n, ex)
		}
	}
	c.StartAPIServer(t)
	for _, tl := range qt {
		tl.endFault()
	}
	var recs []string
	for _, tl := range qt {
		recs = append(recs, fmtRecovery(tl.waitRecovered(t, time.Second, 30*time.Second)))
	}
	for _, s := range stops {
		s()
	}
	r = check(t, mergeTallies(qt...), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "5 Kubernetes worker IDs", cmd, strings.Join(recs, " / ")
	r.Size = "kube-apiserver stopped 20 s, 2 holders under load"
	r.Note = fmt.Sprintf("first refusal after the API server stopped: %s (lease 15 s); same Leases after its return", strings.Join(fails, " / "))
	report.add(t, r)

	// The Lease of B2 deleted by hand: that claim is lost at the next renewal (404); the
	// supervisor claims again by itself. The Lease it creates anew has no mark (no history),
	// so the new claim serves only LeaseDuration + margin (17 s) after it.
	tdel, stopDel := load(b2)
	tdel.startFault()
	c.Kubectl(t, "", "delete", "lease", "leaf-go-worker-"+strconv.FormatInt(wb2, 10), "-n", ns)
	deleted := time.Now()
	fDel := tdel.waitFirstErr(t, 2*k8sDuration)
	waitReadyz(t, b2, 2*k8sDuration+30*time.Second)
	backAfter := time.Since(deleted)
	wb3 := status(t, b2).WorkerID
	time.Sleep(2 * time.Second)
	stopDel()
	if n := idsBetween(tdel, tdel.firstErrAt(), deleted.Add(k8sDuration)); n > 0 {
		t.Errorf("leaf-go-1 issued %d IDs within the lease duration after its Lease was deleted: a claim without history must wait", n)
	}
	if wb3 == wa2 {
		t.Errorf("leaf-go-1 re-claimed worker ID %d, held by leaf-go-0's replacement", wb3)
	}
	r = check(t, tdel, nil, "")
	r.Scenario, r.Cmd, r.Recovery = "5 Kubernetes worker IDs", cmd, "that claim lost; claims again by itself"
	r.Size = "the holder's Lease deleted with kubectl"
	r.Note = fmt.Sprintf("first refusal %v after the delete (next renewal: 404); ready again %v after the delete on worker ID %d (no mark: held back 17 s)",
		fDel.Round(time.Millisecond), backAfter.Round(time.Millisecond), wb3)
	report.add(t, r)

	// SIGTERM A2: it releases its Lease; a new pod preferring that ID takes it.
	tl2, stopTL2 := load(a2)
	time.Sleep(time.Second)
	stopTL2()
	if err := a2.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a2.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("leaf-go-0's replacement did not exit on SIGTERM")
	}
	exited := time.Now()
	if h := holder(wa2); h != "" {
		t.Errorf("Lease %d held by %q after its holder exited on SIGTERM, want released", wa2, h)
	}
	pod := "leaf-go-" + strconv.FormatInt(wa2-10, 10)
	d := startPod(pod)
	wd := status(t, d).WorkerID
	took := time.Since(exited)
	if wd != wa2 {
		t.Errorf("%s took %d, want the released %d", pod, wd, wa2)
	}
	if took >= k8sDuration {
		t.Errorf("%s served %v after the release: it waited out the lease duration of a released Lease", pod, took)
	}
	td, stopD := load(d)
	time.Sleep(2 * time.Second)
	stopD()
	r = check(t, mergeTallies(ta2, tl2, td), nil, "")
	r.Scenario, r.Cmd, r.Recovery = "5 Kubernetes worker IDs", cmd, "n/a"
	r.Size = "holder stopped with SIGTERM, a new pod preferring its ID started after"
	r.Note = fmt.Sprintf("Lease %d released on exit; the new pod served it %v after", wa2, took.Round(time.Millisecond))
	report.add(t, r)

	for tl, w := range map[*tally]int64{ta: wa, tb: wb, ta2: wa2, tb2: wb2, td: wd, tl2: wa2} {
		checkWorker(t, tl, w)
	}
	ids, _, _, _ := mergeTallies(all...).snapshot()
	if dups, ex := duplicates(ids); dups > 0 {
		t.Errorf("%d of %d IDs repeated across the servers, e.g. %v", dups, len(ids), ex)
	}
	t.Logf("%d IDs from six servers, no repeat", len(ids))
}
