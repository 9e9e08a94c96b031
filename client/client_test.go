package client_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leaf-go/leaf/client"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/snowflake"
)

// newClient returns a client closed when the test ends.
func newClient(t *testing.T, base string, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(base, opts)
	if err != nil {
		t.Fatalf("New(%q, %+v): %v", base, opts, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// unique fails the test on a duplicate or non-positive ID.
func unique(t *testing.T, what string, ids []int64) {
	t.Helper()
	s := slices.Clone(ids)
	slices.Sort(s)
	for i, id := range s {
		if id <= 0 {
			t.Fatalf("%s: ID %d is not positive", what, id)
		}
		if i > 0 && id == s[i-1] {
			t.Fatalf("%s: duplicate ID %d among %d", what, id, len(s))
		}
	}
}

// TestSingleIDSequential: in single-ID mode against one server the IDs of
// one caller are 1, 2, 3, … across segment switches (step 100), and every
// request went to Leaf's route.
func TestSingleIDSequential(t *testing.T) {
	p := sqliteServer(t, map[string]int64{"seq": 100})
	rec := newRecorder(t)
	c := newClient(t, p.base(), client.Options{BatchSize: 1, HTTPClient: rec.client()})
	for want := int64(1); want <= 250; want++ {
		got, err := c.Segment(t.Context(), "seq")
		if err != nil || got != want {
			t.Fatalf("Segment(seq) = %d, %v, want %d", got, err, want)
		}
	}
	if got := rec.count("/api/segment/get/seq"); got != 250 {
		t.Errorf("requests to /api/segment/get/seq = %d, want 250 (%v)", got, rec.paths())
	}
}

// TestUnknownTag: an unknown tag gives ErrTagNotFound after exactly one
// request, although two more servers are configured, in both modes.
func TestUnknownTag(t *testing.T) {
	a := sqliteServer(t, map[string]int64{"known": 10})
	b := sqliteServer(t, map[string]int64{"known": 10})
	batch := hasBatch(t, a)
	tests := []struct {
		name       string
		give       client.Options
		wantStatus int
		wantLeaf   int64
		wantCode   string
	}{
		{name: "single", give: client.Options{BatchSize: 1}, wantStatus: 500, wantLeaf: -2},
		{name: "batch", give: client.Options{BatchSize: 100}, wantStatus: 404, wantLeaf: -2, wantCode: "tag_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "batch" && !batch {
				t.Skip("leaf-server has no batch route yet")
			}
			rec := newRecorder(t)
			tt.give.HTTPClient = rec.client()
			tt.give.Servers = []string{b.base(), a.base()}
			c := newClient(t, a.base(), tt.give)
			for i := range 3 { // rotation starts each call on another server
				start := time.Now()
				id, err := c.Segment(t.Context(), "nope")
				took := time.Since(start)
				if !errors.Is(err, client.ErrTagNotFound) {
					t.Fatalf("Segment(nope) = %d, %v, want ErrTagNotFound", id, err)
				}
				var e *client.Error
				if !errors.As(err, &e) || e.Status != tt.wantStatus || e.LeafCode != tt.wantLeaf || e.Code != tt.wantCode || e.Server == "" {
					t.Errorf("Segment(nope) error = %#v, want status %d, Leaf code %d, code %q and the server",
						e, tt.wantStatus, tt.wantLeaf, tt.wantCode)
				}
				if errors.Is(err, client.ErrNotReady) {
					t.Errorf("Segment(nope) error %v also matches ErrNotReady", err)
				}
				if got := rec.count("/"); got != i+1 {
					t.Fatalf("after %d calls for an unknown tag: %d requests, want %d (no retry): %v", i+1, got, i+1, rec.paths())
				}
				if took > time.Second {
					t.Errorf("Segment(nope) took %v, want well under 1s", took)
				}
			}
			if _, err := c.Segment(t.Context(), "known"); err != nil {
				t.Errorf("Segment(known) after unknown tags: %v", err)
			}
		})
	}
}

// TestInvalidTag: tags the server would refuse fail without a request.
func TestInvalidTag(t *testing.T) {
	rec := newRecorder(t)
	c := newClient(t, deadURL(t), client.Options{HTTPClient: rec.client()})
	for _, give := range []string{"", strings.Repeat("x", 129), "a\nb", "\xff"} {
		if _, err := c.Segment(t.Context(), give); !errors.Is(err, client.ErrInvalidTag) {
			t.Errorf("Segment(%q) error = %v, want ErrInvalidTag", give, err)
		}
	}
	if n := rec.count("/"); n != 0 {
		t.Errorf("invalid tags made %d requests, want 0", n)
	}
}

// TestLeafCompatible: with LeafCompatible the client never calls /api/v1,
// even with the default BatchSize and a server that has the batch route;
// IDs from many goroutines are unique; a tag with a slash, space and dot
// is path-escaped and taken whole.
func TestLeafCompatible(t *testing.T) {
	const odd = "a/b c.d"
	p := sqliteServer(t, map[string]int64{"compat": 50, odd: 50}, "--worker-id", "7")
	rec := newRecorder(t)
	c := newClient(t, p.base(), client.Options{LeafCompatible: true, HTTPClient: rec.client()})
	const workers, each = 8, 100
	seg := make([][]int64, workers)
	sf := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				id, err := c.Segment(context.Background(), "compat")
				if err != nil {
					t.Errorf("Segment(compat): %v", err)
					return
				}
				seg[w] = append(seg[w], id)
				id, err = c.Snowflake(context.Background())
				if err != nil {
					t.Errorf("Snowflake(): %v", err)
					return
				}
				sf[w] = append(sf[w], id)
			}
		})
	}
	wg.Wait()
	unique(t, "segment", slices.Concat(seg...))
	unique(t, "snowflake", slices.Concat(sf...))
	for _, id := range slices.Concat(sf...) {
		if w := snowflake.Decompose(id).Worker; w != 7 {
			t.Fatalf("snowflake ID %d has worker %d, want 7", id, w)
		}
	}
	if id, err := c.Segment(t.Context(), odd); err != nil || id != 1 {
		t.Errorf("Segment(%q) = %d, %v, want 1", odd, id, err)
	}
	for path := range rec.paths() {
		if !strings.HasPrefix(path, "/api/segment/get/") && !strings.HasPrefix(path, "/api/snowflake/get/") {
			t.Errorf("LeafCompatible client called %s", path)
		}
	}
	if n := rec.count("/api/v1"); n != 0 {
		t.Errorf("LeafCompatible client made %d /api/v1 requests", n)
	}
	if want := "/api/segment/get/" + url.PathEscape(odd); rec.count(want) != 1 {
		t.Errorf("requests to %s = %d, want 1 (%v)", want, rec.count(want), rec.paths())
	}
}

// TestBatchManyGoroutines: 64 goroutines take 64,000 IDs through batches of
// 500: all unique, one refill in flight at most, and about 128 refills.
func TestBatchManyGoroutines(t *testing.T) {
	p := sqliteServer(t, map[string]int64{"many": 1000})
	skipWithoutBatch(t, p)
	rec := newRecorder(t)
	const batch, workers, each = 500, 64, 1000
	c := newClient(t, p.base(), client.Options{BatchSize: batch, HTTPClient: rec.client()})
	ids := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				id, err := c.Segment(context.Background(), "many")
				if err != nil {
					t.Errorf("Segment(many): %v", err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(ids...)
	if len(all) != workers*each {
		t.Fatalf("got %d IDs, want %d", len(all), workers*each)
	}
	unique(t, "segment", all)
	const path = "/api/v1/segment/many"
	refills := rec.count(path)
	if lo, hi := workers*each/batch, workers*each/batch+2; refills < lo || refills > hi {
		t.Errorf("refills = %d, want %d..%d", refills, lo, hi)
	}
	if m := rec.maxConcurrent(path); m != 1 {
		t.Errorf("refills in flight at once = %d, want 1", m)
	}
	if n := rec.count("/api/segment/get/"); n != 0 {
		t.Errorf("batch client made %d single-ID requests", n)
	}
	t.Logf("%d IDs in %d refills", len(all), refills)
}

// TestThreeServersOneKilled: three servers on one PostgreSQL database
// (worker IDs 1, 2, 3); 16 goroutines take segment and snowflake IDs; one
// server is killed with SIGKILL after a third of the run; the run goes on
// until a request to the dead server failed, and then for two thirds more.
// No caller sees an error and every ID is unique.
func TestThreeServersOneKilled(t *testing.T) {
	tests := []struct {
		name  string
		give  client.Options
		total int // segment IDs to take: a third before the kill, the rest after
	}{
		{name: "single", give: client.Options{BatchSize: 1}, total: 6_000},
		{name: "batch", give: client.Options{BatchSize: 200}, total: 100_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dbtest.Postgres(t)
			createTag(t, d, "ha", 100)
			var servers []*proc
			for w := 1; w <= 3; w++ {
				servers = append(servers, startServer(t, t.TempDir(),
					"--segment-dsn", d, "--migrate=false", "--worker-id", strconv.Itoa(w)))
			}
			if tt.name == "batch" {
				skipWithoutBatch(t, servers[0])
			}
			victim := servers[0]
			rec := newRecorder(t)
			tt.give.HTTPClient = rec.client()
			tt.give.Servers = []string{servers[1].base(), servers[2].base()}
			c := newClient(t, victim.base(), tt.give)

			const workers = 16
			var (
				taken atomic.Int64 // segment IDs taken so far
				stop  atomic.Bool  // set when the run is over
			)
			seg := make([][]int64, workers)
			sf := make([][]int64, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						id, err := c.Segment(context.Background(), "ha")
						if err != nil {
							t.Errorf("Segment(ha) #%d: %v", i, err)
							return
						}
						seg[w] = append(seg[w], id)
						taken.Add(1)
						if i%4 == 0 {
							id, err := c.Snowflake(context.Background())
							if err != nil {
								t.Errorf("Snowflake() #%d: %v", i, err)
								return
							}
							sf[w] = append(sf[w], id)
						}
					}
				})
			}
			workersDone := make(chan struct{})
			go func() { wg.Wait(); close(workersDone) }()
			// waitFor waits until done() holds; false when the workers
			// stopped early (they reported why) or after a minute.
			waitFor := func(what string, done func() bool) bool {
				deadline := time.After(time.Minute)
				for !done() {
					select {
					case <-workersDone:
						return false
					case <-deadline:
						t.Errorf("no %s within a minute (%d IDs taken, requests by path %v)",
							what, taken.Load(), rec.paths())
						return false
					case <-time.After(time.Millisecond):
					}
				}
				return true
			}
			// The phases wait for events, not for a number of IDs: a count
			// of IDs after the kill may be served without the victim (after
			// its first failure the client tries it last for a second, which
			// on a fast run is longer than the rest of the run), and a count
			// of requests read after the kill may already include the failed
			// ones.
			var (
				atKill     int // requests to the victim before it died
				failedKill int // transport errors on the victim before it died
			)
			if waitFor("third of the IDs", func() bool { return taken.Load() >= int64(tt.total/3) }) {
				atKill = rec.hostCount(victim.addr)
				failedKill = rec.failures(victim.addr)
				victim.kill9()
				// Keep taking IDs until a request went to the dead server
				// and failed, then take the rest on the two survivors.
				if waitFor("failed request to the killed server", func() bool {
					return rec.failures(victim.addr) > failedKill
				}) {
					rest := taken.Load() + int64(tt.total*2/3)
					waitFor("rest of the IDs after the failover", func() bool { return taken.Load() >= rest })
				}
			}
			stop.Store(true)
			<-workersDone
			all := slices.Concat(seg...)
			unique(t, "segment", all)
			unique(t, "snowflake", slices.Concat(sf...))
			workersSeen := map[int64]int{}
			for _, id := range slices.Concat(sf...) {
				workersSeen[snowflake.Decompose(id).Worker]++
			}
			if len(workersSeen) < 2 {
				t.Errorf("snowflake IDs came from workers %v, want at least 2 of 1, 2, 3", workersSeen)
			}
			if atKill == 0 {
				t.Errorf("the killed server got no request before it died: %v", rec.paths())
			}
			failed := rec.failures(victim.addr) - failedKill // after it died
			if failed == 0 && !t.Failed() {
				t.Errorf("no request to the killed server failed: failover not exercised")
			}
			t.Logf("%d segment and %d snowflake IDs, requests by path %v, failed on the killed server %d, snowflake workers %v",
				len(all), len(slices.Concat(sf...)), rec.paths(), failed, workersSeen)
		})
	}
}

// TestCloseStopsWaiters: against a server that accepts and never answers,
// a caller's wait is bounded by its context, Close returns at once, callers
// still waiting get ErrClosed, later calls get ErrClosed, and no goroutine
// is left behind.
func TestCloseStopsWaiters(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		conns   []net.Conn
		mu      sync.Mutex // guards conns
		accepts sync.WaitGroup
	)
	accepts.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	})
	c, err := client.New("http://"+l.Addr().String(), client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Segment(ctx, "hang"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Segment(hang) with a 100ms context = %v, want DeadlineExceeded", err)
	}
	accepted := func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
	before := accepted()
	waiter := make(chan error, 1)
	go func() {
		_, err := c.Snowflake(context.Background())
		waiter <- err
	}()
	// Close while it waits for the refill: once the refill's request has
	// reached the server, not after a fixed time.
	waittest.For(t, 10*time.Second, "the snowflake refill's connection", func() bool { return accepted() > before })
	start := time.Now()
	c.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v with refills hanging, want well under 1s", took)
	}
	select {
	case err := <-waiter:
		if !errors.Is(err, client.ErrClosed) {
			t.Errorf("waiting Snowflake() after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a caller waiting for a refill was not released by Close")
	}
	if _, err := c.Segment(t.Context(), "hang"); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Segment after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Snowflake(t.Context()); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Snowflake after Close = %v, want ErrClosed", err)
	}
	c.Close() // idempotent
	l.Close()
	accepts.Wait()
	mu.Lock()
	for _, conn := range conns {
		conn.Close()
	}
	mu.Unlock()
	goleak.VerifyNone(t, ignore)
}

// TestNewRejects: options out of range and bad URLs are refused by New.
func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		base string
		give client.Options
	}{
		{"no scheme", "127.0.0.1:8080", client.Options{}},
		{"ftp", "ftp://h", client.Options{}},
		{"query", "http://h/?a=1", client.Options{}},
		{"bad extra server", "http://h", client.Options{Servers: []string{"h:1"}}},
		{"negative timeout", "http://h", client.Options{Timeout: -time.Second}},
		{"batch too big", "http://h", client.Options{BatchSize: client.MaxBatchSize + 1}},
		{"negative batch", "http://h", client.Options{BatchSize: -1}},
		{"refill 1", "http://h", client.Options{RefillAt: 1}},
		{"refill negative", "http://h", client.Options{RefillAt: -0.1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := client.New(tt.base, tt.give); err == nil {
				c.Close()
				t.Errorf("New(%q, %+v) = nil error, want one", tt.base, tt.give)
			}
		})
	}
}

// TestDisabledFailsOver: a server with snowflake mode off answers 503
// (ErrDisabled); the client fails over to a server that has it on, and with
// only the disabled server the caller gets ErrDisabled, in both modes.
func TestDisabledFailsOver(t *testing.T) {
	off := sqliteServer(t, nil, "--snowflake=false")
	on := sqliteServer(t, nil, "--worker-id", "9")
	for _, tt := range []struct {
		name string
		give client.Options
	}{
		{"single", client.Options{BatchSize: 1}},
		{"batch", client.Options{BatchSize: 50}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			alone := newClient(t, off.base(), tt.give)
			_, err := alone.Snowflake(t.Context())
			var e *client.Error
			if !errors.Is(err, client.ErrDisabled) || !errors.As(err, &e) || e.Status != 503 {
				t.Errorf("Snowflake() on a server with snowflake off = %v, want a 503 matching ErrDisabled", err)
			}
			opts := tt.give
			opts.Servers = []string{on.base()}
			both := newClient(t, off.base(), opts)
			for i := range 200 {
				id, err := both.Snowflake(t.Context())
				if err != nil {
					t.Fatalf("Snowflake() #%d with one server disabled: %v", i, err)
				}
				if w := snowflake.Decompose(id).Worker; w != 9 {
					t.Fatalf("Snowflake() #%d = %d from worker %d, want 9", i, id, w)
				}
			}
		})
	}
}

// TestEscapedTag: tags with characters that need escaping reach their own
// leaf_alloc row in both modes; "%41" is not served from the row "A".
func TestEscapedTag(t *testing.T) {
	tags := []string{"a/b c.d", "x?y#z", "100%", "%41", "%2F", "日本"}
	rows := map[string]int64{"A": 10}
	for _, tag := range tags {
		rows[tag] = 10
	}
	p := sqliteServer(t, rows)
	for _, tt := range []struct {
		name string
		give client.Options
	}{
		{"single", client.Options{BatchSize: 1}},
		{"batch", client.Options{BatchSize: 5}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, p.base(), tt.give)
			for _, tag := range tags {
				var got []int64
				for range 6 {
					id, err := c.Segment(t.Context(), tag)
					if err != nil {
						t.Fatalf("Segment(%q): %v", tag, err)
					}
					got = append(got, id)
				}
				if want := []int64{1, 2, 3, 4, 5, 6}; tt.name == "single" && !slices.Equal(got, want) {
					t.Errorf("Segment(%q) x6 = %v, want %v (a row of its own)", tag, got, want)
				}
			}
		})
	}
	// "%41" must not have been served from the row "A".
	c := newClient(t, p.base(), client.Options{BatchSize: 1})
	if id, err := c.Segment(t.Context(), "A"); err != nil || id != 1 {
		t.Errorf("Segment(A) after using %q = %d, %v, want 1 (untouched row)", "%41", id, err)
	}
}
