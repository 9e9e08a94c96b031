// Package ordered checks ordered tags (docs/contract.md §12) end to end:
// real leaf-server processes on a private PostgreSQL or MariaDB, many
// clients over HTTP, faults, and every recorded history checked for
// linearizability with porcupine.
package ordered

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leaf-go/leaf/client"
	"github.com/leaf-go/leaf/internal/dbproctest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// serverBin is the leaf-server binary built once by TestMain.
var serverBin string

func TestMain(m *testing.M) { servertest.Run(m, &serverBin, nil) }

// span is the output of one successful request: the IDs lo..hi it got (one
// ID: lo == hi; a batch: consecutive IDs).
type span struct{ lo, hi int64 }

// counterModel is the sequential specification of an ordered tag, a
// counter whose every answer is larger than every answer before it, over
// ranks: check replaces each request's IDs by the rank of its lowest ID
// among all answers (1, 2, 3, …; equal IDs share a rank). That relabeling
// keeps the order, which is all the specification looks at, and since the
// history holds every answer, an increasing linearization of it must take
// the ranks one by one: the state is the last rank and the largest ID so
// far, and a request may come next only with the next rank and IDs above
// that largest one. (The same specification written as "larger
// than the state" has the same linearizable histories but sends porcupine
// down every ordering of 32 concurrent requests: no verdict on 100 of them
// in a minute.) A history is linearizable under it exactly when each
// request's IDs are larger than the IDs of every request that completed
// before it was sent, and no ID is answered twice.
var counterModel = porcupine.Model{
	Init: func() any { return counterState{} },
	Step: func(state, _, output any) (bool, any) {
		r, s := output.(ranked), state.(counterState)
		return r.rank == s.rank+1 && r.lo > s.hi, counterState{rank: r.rank, hi: r.hi}
	},
	DescribeOperation: func(_, output any) string {
		r := output.(ranked)
		if r.lo == r.hi {
			return fmt.Sprintf("%d (rank %d)", r.lo, r.rank)
		}
		return fmt.Sprintf("%d..%d (rank %d)", r.lo, r.hi, r.rank)
	},
	DescribeState: func(state any) string {
		s := state.(counterState)
		return fmt.Sprintf("rank %d, largest ID %d", s.rank, s.hi)
	},
}

// counterState is the state of counterModel: the rank of the last request
// and the largest ID answered so far.
type counterState struct {
	rank int
	hi   int64
}

// ranked is a request's answer with its rank (see counterModel).
type ranked struct {
	span
	rank int
}

// check runs both checks on a history of successful requests and returns
// what they found: the direct check (directViolations) and porcupine over
// counterModel, with timeout for porcupine. visualize, when not empty, is
// where porcupine's HTML goes on a violation.
func check(ops []porcupine.Operation, timeout time.Duration, visualize string) []string {
	problems := directViolations(ops)
	los := make([]int64, 0, len(ops))
	for _, op := range ops {
		los = append(los, op.Output.(span).lo)
	}
	slices.Sort(los)
	los = slices.Compact(los)
	rankedOps := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		s := op.Output.(span)
		r, _ := slices.BinarySearch(los, s.lo)
		op.Output = ranked{span: s, rank: r + 1}
		rankedOps[i] = op
	}
	res, info := porcupine.CheckOperationsVerbose(counterModel, rankedOps, timeout)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		where := ""
		if visualize != "" {
			if err := porcupine.VisualizePath(counterModel, info, visualize); err == nil {
				where = " (visualization: " + visualize + ")"
			}
		}
		problems = append(problems, fmt.Sprintf("porcupine: the history of %d requests is not linearizable%s", len(ops), where))
	default:
		problems = append(problems, fmt.Sprintf("porcupine: no verdict on %d requests within %v", len(ops), timeout))
	}
	return problems
}

// history records successful requests. A failed request (an error answer,
// a connection cut by a kill, a timeout) handed out no ID to anyone, so it
// constrains nothing and is left out.
type history struct {
	t0  time.Time
	mu  sync.Mutex // guards ops and errs
	ops []porcupine.Operation
	// errs counts failed requests by cause.
	errs map[string]int
	ok   atomic.Int64
}

func (h *history) now() int64 { return int64(time.Since(h.t0)) }

func (h *history) add(client int, call int64, s span) {
	ret := h.now()
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Call: call, Output: s, Return: ret})
	h.mu.Unlock()
	h.ok.Add(1)
}

func (h *history) fail(cause string) {
	h.mu.Lock()
	h.errs[cause]++
	h.mu.Unlock()
}

// fleet is the set of running leaf-servers; a killed one is replaced by a
// new process on the same data directory.
type fleet struct {
	mu    sync.Mutex
	procs []*servertest.Proc
}

func (f *fleet) pick() *servertest.Proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs[rand.IntN(len(f.procs))]
}

func (f *fleet) urls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, p := range f.procs {
		out = append(out, p.URL(""))
	}
	return out
}

// TestOrderedLinearizable: 3 leaf-servers share an ordered tag on a private
// database server (internal/dbproctest: the shared servers are never
// restarted). 24 HTTP clients call Leaf's route, 4 the batch route (3 IDs
// per request) and 4 use the Go client's Ordered with all servers, while
// one leaf-server is killed with kill -9 and started again, and then the
// database is killed with kill -9 and started again. The history of every
// successful request must be linearizable under counterModel (porcupine)
// and, checked directly too, each answer larger than every answer that
// returned before its request was sent.
func TestOrderedLinearizable(t *testing.T) {
	for _, kind := range []dbproctest.Kind{dbproctest.Postgres, dbproctest.MariaDB} {
		t.Run(string(kind), func(t *testing.T) {
			srv := dbproctest.New(t, kind)
			ctx := context.Background()
			st, err := dsn.Open(ctx, srv.DSN(), true)
			if err != nil {
				t.Fatalf("open %s: %v", dsn.Redact(srv.DSN()), err)
			}
			const tag = "lin"
			if err := st.Create(ctx, store.Row{BizTag: tag, Step: 1000, Ordered: true}); err != nil {
				t.Fatal(err)
			}
			st.Close()
			args := []string{"--segment-dsn", srv.DSN(), "--snowflake=false", "--wait-timeout", "2s"}
			dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
			f := &fleet{}
			for _, dir := range dirs {
				f.procs = append(f.procs, servertest.Start(t, serverBin, servertest.Options{Dir: dir, Args: args}))
			}

			h := &history{t0: time.Now(), errs: map[string]int{}}
			runCtx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer hc.CloseIdleConnections()
			id := 0
			for range 24 {
				c := id
				id++
				wg.Go(func() { leafClient(runCtx, h, f, hc, c, tag) })
			}
			for range 4 {
				c := id
				id++
				wg.Go(func() { batchClient(runCtx, h, f, hc, c, tag) })
			}
			for range 4 {
				c := id
				id++
				wg.Go(func() { goClient(runCtx, t, h, f, c, tag) })
			}

			// Faults, each after enough successful requests since the last.
			waitOK := func(what string, n int64) {
				t.Helper()
				want := h.ok.Load() + n
				deadline := time.Now().Add(60 * time.Second)
				for h.ok.Load() < want {
					if time.Now().After(deadline) {
						stop()
						wg.Wait()
						t.Fatalf("%s: %d successful requests, want %d within 60 s; errors %v", what, h.ok.Load(), want, h.errs)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			waitOK("warm-up", 500)
			f.mu.Lock()
			victim := f.procs[0]
			f.procs = f.procs[1:]
			f.mu.Unlock()
			victim.Kill9() // requests in flight on it are cut
			waitOK("after kill -9 of a leaf-server", 500)
			p := servertest.Start(t, serverBin, servertest.Options{Dir: dirs[0], Args: args})
			f.mu.Lock()
			f.procs = append(f.procs, p)
			f.mu.Unlock()
			waitOK("after the leaf-server restart", 500)
			srv.Kill9(t)
			downAt := h.ok.Load()
			time.Sleep(300 * time.Millisecond) // requests fail meanwhile
			srv.Start(t)
			waitOK("after the database restart", 500)
			stop()
			wg.Wait()

			h.mu.Lock()
			ops, errs := h.ops, h.errs
			h.mu.Unlock()
			t.Logf("%s: %d successful requests (%d after the database restart began), failed: %v", kind, len(ops), int64(len(ops))-downAt, errs)
			// No ID outside what the database confirmed: all below max_id.
			st, err = dsn.Open(ctx, srv.DSN(), false)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			maxID, err := st.MaxID(ctx, tag)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range ops {
				if hi := op.Output.(span).hi; hi >= maxID {
					t.Fatalf("ID %d answered, but max_id is %d", hi, maxID)
				}
			}
			vis := filepath.Join(os.TempDir(), fmt.Sprintf("leaf-ordered-%s-%d.html", kind, time.Now().UnixNano()))
			for _, p := range check(ops, 5*time.Minute, vis) {
				t.Error(p)
			}
		})
	}
}

// directViolations checks the real-time order without the checker: each
// request's lowest ID must exceed the highest ID of every request that
// returned before it was called, and no ID may be answered twice. It
// returns one line per violation (at most 5, then a count).
func directViolations(ops []porcupine.Operation) []string {
	byRet := slices.Clone(ops)
	slices.SortFunc(byRet, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
	// prefixMax[i] is the highest ID among byRet[:i].
	prefixMax := make([]int64, len(byRet)+1)
	for i, op := range byRet {
		prefixMax[i+1] = max(prefixMax[i], op.Output.(span).hi)
	}
	var out []string
	seen := map[int64]bool{}
	bad := 0
	for _, op := range ops {
		s := op.Output.(span)
		for id := s.lo; id <= s.hi; id++ {
			if seen[id] {
				out = append(out, fmt.Sprintf("ID %d answered twice", id))
			}
			seen[id] = true
		}
		// byRet[:n] returned strictly before op was called.
		n, _ := slices.BinarySearchFunc(byRet, op.Call, func(o porcupine.Operation, call int64) int {
			if o.Return < call {
				return -1
			}
			return 1
		})
		if prefixMax[n] >= s.lo {
			bad++
			if bad <= 5 {
				out = append(out, fmt.Sprintf("request called at %v got %d..%d, but an answer of %d had returned before it was called",
					time.Duration(op.Call), s.lo, s.hi, prefixMax[n]))
			}
		}
	}
	if bad > 5 {
		out = append(out, fmt.Sprintf("%d of %d requests broke the real-time order", bad, len(ops)))
	}
	return out
}

// TestCheckCatchesViolations: both checks flag a history where a request
// got a smaller ID than one answered before it was sent, and one with an ID
// answered twice; they pass the same requests in the right order.
func TestCheckCatchesViolations(t *testing.T) {
	op := func(client int, call, ret, lo, hi int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Output: span{lo, hi}}
	}
	tests := []struct {
		name string
		give []porcupine.Operation
		want int // problems expected from each check: 0 or at least 1
	}{
		{"in order, concurrent ones either way", []porcupine.Operation{op(0, 0, 10, 2, 2), op(1, 5, 12, 1, 1), op(2, 20, 30, 3, 5), op(0, 40, 50, 9, 9)}, 0},
		{"smaller after a completed one", []porcupine.Operation{op(0, 0, 10, 5, 5), op(1, 20, 30, 3, 3)}, 1},
		{"batch overlapping an earlier one", []porcupine.Operation{op(0, 0, 10, 3, 5), op(1, 20, 30, 5, 7)}, 1},
		{"same ID twice, concurrent", []porcupine.Operation{op(0, 0, 10, 4, 4), op(1, 5, 15, 4, 4)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct := directViolations(tt.give)
			all := check(tt.give, time.Minute, "")
			porc := len(all) - len(direct)
			if tt.want == 0 && len(all) > 0 {
				t.Errorf("check = %q, want no problem", all)
			}
			if tt.want > 0 && (len(direct) == 0 || porc == 0) {
				t.Errorf("direct check found %q and porcupine %d problems; want both to flag it", direct, porc)
			}
		})
	}
}

// leafClient calls Leaf's route GET /api/segment/get/{tag} on random
// servers until ctx ends.
func leafClient(ctx context.Context, h *history, f *fleet, hc *http.Client, id int, tag string) {
	for ctx.Err() == nil {
		p := f.pick()
		call := h.now()
		status, body, err := get(ctx, hc, p.URL("/api/segment/get/"+tag))
		if err != nil || status != http.StatusOK {
			h.fail(cause(status, err))
			continue
		}
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil || n <= 0 {
			h.fail("bad body " + body)
			continue
		}
		h.add(id, call, span{n, n})
	}
}

// batchClient calls the batch route GET /api/v1/segment/{tag}?count=3.
func batchClient(ctx context.Context, h *history, f *fleet, hc *http.Client, id int, tag string) {
	for ctx.Err() == nil {
		p := f.pick()
		call := h.now()
		status, body, err := get(ctx, hc, p.URL("/api/v1/segment/"+tag+"?count=3"))
		if err != nil || status != http.StatusOK {
			h.fail("batch " + cause(status, err))
			continue
		}
		var a struct{ IDs []string }
		if err := json.Unmarshal([]byte(body), &a); err != nil || len(a.IDs) != 3 {
			h.fail("batch bad body " + body)
			continue
		}
		var ids []int64
		for _, s := range a.IDs {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				h.fail("batch bad ID " + s)
				continue
			}
			ids = append(ids, n)
		}
		if len(ids) != 3 || ids[1] != ids[0]+1 || ids[2] != ids[1]+1 {
			h.fail(fmt.Sprintf("batch IDs %v not consecutive", ids))
			continue
		}
		h.add(id, call, span{ids[0], ids[2]})
	}
}

// goClient calls client.Ordered with every server of the fleet as it was
// when the client was made (a killed one fails over to the next).
func goClient(ctx context.Context, t *testing.T, h *history, f *fleet, id int, tag string) {
	urls := f.urls()
	c, err := client.New(urls[0], client.Options{Servers: urls[1:], Timeout: 5 * time.Second})
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	for ctx.Err() == nil {
		call := h.now()
		n, err := c.Ordered(ctx, tag)
		if err != nil {
			h.fail("go client")
			continue
		}
		h.add(id, call, span{n, n})
	}
}

func get(ctx context.Context, hc *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func cause(status int, err error) string {
	if err != nil {
		return "transport"
	}
	return strconv.Itoa(status)
}
