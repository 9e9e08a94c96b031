package zkworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/zkworker"
)

// options returns Options for one test: its own namespace and cache directory.
func options(t *testing.T, addr, name, port string) zkworker.Options {
	return zkworker.Options{
		Servers:  []string{addr},
		LeafName: name,
		IP:       "127.0.0.1",
		Port:     port,
		CacheDir: t.TempDir(),
		Logger:   slog.New(slog.DiscardHandler),
		// The shortest session ZooKeeper grants with its default tickTime (2 s): a claim
		// without history waits 4 s + 1 s.
		SessionTimeout: 4 * time.Second,
		Margin:         time.Second,
	}
}

// offsetClock reads the real clock moved by an offset; Sleep moves the offset instead of
// sleeping. Unlike a frozen fake clock, it lets the real time pass that a claim without
// history waits out.
type offsetClock struct {
	mu     sync.Mutex // guards offset
	offset time.Duration
}

func newOffsetClock(at time.Time) *offsetClock { return &offsetClock{offset: time.Until(at)} }

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// claim claims for o and waits until the worker backs IDs (a claim that may follow a live
// holder is held back a session timeout + margin).
func claim(t *testing.T, o zkworker.Options) *zkworker.Worker {
	t.Helper()
	w, err := zkworker.Claim(context.Background(), o)
	if err != nil {
		t.Fatalf("Claim(%s:%s) = %v", o.IP, o.Port, err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	deadline := time.Now().Add(30 * time.Second)
	for w.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("Claim(%s:%s): not ready within 30 s: %v", o.IP, o.Port, w.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return w
}

// leafNode creates a node as Java Leaf does: persistent sequential, Jackson's Endpoint JSON.
func leafNode(t *testing.T, conn *zk.Conn, name, addr string, ts int64) string {
	t.Helper()
	parts := strings.Split("snowflake/"+name+"/forever", "/")
	for i := range parts {
		_, err := conn.Create("/"+strings.Join(parts[:i+1], "/"), nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	ip, port, _ := strings.Cut(addr, ":")
	data := fmt.Sprintf(`{"ip":"%s","port":"%s","timestamp":%d}`, ip, port, ts)
	p, err := conn.Create("/snowflake/"+name+"/forever/"+addr+"-", []byte(data), zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseNodeName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give     string
		wantAddr string
		wantSeq  int64
		wantOK   bool
	}{
		{give: "10.0.0.1:8080-0000000000", wantAddr: "10.0.0.1:8080", wantSeq: 0, wantOK: true},
		{give: "10.0.0.1:8080-0000001023", wantAddr: "10.0.0.1:8080", wantSeq: 1023, wantOK: true},
		{give: "10.0.0.1:port-a-0000000007", wantAddr: "10.0.0.1:port-a", wantSeq: 7, wantOK: true},
		{give: "10.0.0.1:8080-", wantOK: false},
		{give: "10.0.0.1:8080", wantOK: false},
		{give: "-0000000001", wantOK: false},
		{give: "10.0.0.1:8080-x1", wantOK: false},
		{give: "10.0.0.1:8080--1", wantAddr: "10.0.0.1:8080-", wantSeq: 1, wantOK: true}, // last '-' wins
	}
	for _, tt := range tests {
		addr, seq, ok := zkworker.ParseNodeName(tt.give)
		if addr != tt.wantAddr || seq != tt.wantSeq || ok != tt.wantOK {
			t.Errorf("ParseNodeName(%q) = %q, %d, %v, want %q, %d, %v", tt.give, addr, seq, ok, tt.wantAddr, tt.wantSeq, tt.wantOK)
		}
	}
}

// TestClaimDistinct: a node written by hand in Leaf's format and two leaf-go claimers in one
// namespace get three different worker IDs; the first node's number is parsed too.
func TestClaimDistinct(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	conn := zktest.Conn(t, addr)
	javaNode := leafNode(t, conn, name, "10.9.9.9:8080", time.Now().UnixMilli())
	_, javaID, _ := zkworker.ParseNodeName(filepath.Base(javaNode))

	var (
		mu  sync.Mutex
		ids = map[int64]string{javaID: "java"}
		wg  sync.WaitGroup
	)
	for _, port := range []string{"7001", "7002"} {
		o := options(t, addr, name, port)
		wg.Go(func() {
			w, err := zkworker.Claim(context.Background(), o)
			if err != nil {
				t.Errorf("Claim(%s) = %v", port, err)
				return
			}
			t.Cleanup(func() { w.Close(context.Background()) })
			if st := w.Status(); st.Source != zkworker.SourceZooKeeper {
				t.Errorf("Status().Source = %q, want %q", st.Source, zkworker.SourceZooKeeper)
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := ids[w.WorkerID()]; dup {
				t.Errorf("Claim(%s).WorkerID() = %d, already held by %s", port, w.WorkerID(), other)
			}
			ids[w.WorkerID()] = port
		})
	}
	wg.Wait()
	if len(ids) != 3 {
		t.Fatalf("worker IDs = %v, want three different", ids)
	}
	children, _, err := conn.Children("/snowflake/" + name + "/forever")
	if err != nil || len(children) != 3 {
		t.Fatalf("Children() = %v, %v, want 3 nodes", children, err)
	}
}

// TestNodeData: the node name and data follow Leaf's format byte for byte.
func TestNodeData(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	o := options(t, addr, name, "8080")
	o.IP = "127.0.0.9"
	w := claim(t, o)
	st := w.Status()
	wantNode := regexp.MustCompile(`^/snowflake/` + regexp.QuoteMeta(name) + `/forever/127\.0\.0\.9:8080-(\d{10})$`)
	m := wantNode.FindStringSubmatch(st.Node)
	if m == nil || m[1] != fmt.Sprintf("%010d", w.WorkerID()) {
		t.Fatalf("Status().Node = %q, want %s with the worker ID %d", st.Node, wantNode, w.WorkerID())
	}
	conn := zktest.Conn(t, addr)
	data, _, err := conn.Get(st.Node)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\{"ip":"127\.0\.0\.9","port":"8080","timestamp":\d{13}\}$`).Match(data) {
		t.Errorf("node data = %s, want Leaf's {\"ip\":\"…\",\"port\":\"…\",\"timestamp\":<ms>}", data)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["port"].(string); !ok {
		t.Errorf("port = %#v, want a JSON string", fields["port"])
	}
	if _, ok := fields["timestamp"].(float64); !ok {
		t.Errorf("timestamp = %#v, want a JSON number", fields["timestamp"])
	}
	cache, err := os.ReadFile(filepath.Join(o.CacheDir, name, "leafconf", "8080", "workerID.properties"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(cache), fmt.Sprintf("workerID=%d\n", w.WorkerID())) {
		t.Errorf("cache file = %q, want it to start with workerID=%d", cache, w.WorkerID())
	}
}

// TestReclaimKeepsNumber: a restarted ip:port reuses its node and number.
func TestReclaimKeepsNumber(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	o := options(t, addr, name, "9000")
	claim(t, options(t, addr, name, "9001")) // another address first, so our number is not 0
	w1 := claim(t, o)
	node, id := w1.Status().Node, w1.WorkerID()
	w1.Close(context.Background())
	w2 := claim(t, o)
	if w2.WorkerID() != id || w2.Status().Node != node {
		t.Errorf("re-Claim = %d at %s, want %d at %s", w2.WorkerID(), w2.Status().Node, id, node)
	}
	children, _, _ := zktest.Conn(t, addr).Children("/snowflake/" + name + "/forever")
	if len(children) != 2 {
		t.Errorf("nodes = %v, want 2 (no new node for a known address)", children)
	}
}

// TestReclaimJavaNode: a node that Java Leaf created for our address is reused.
func TestReclaimJavaNode(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	conn := zktest.Conn(t, addr)
	leafNode(t, conn, name, "10.1.1.1:8080", time.Now().UnixMilli())
	p := leafNode(t, conn, name, "127.0.0.1:8080", time.Now().UnixMilli()-1000)
	w := claim(t, options(t, addr, name, "8080"))
	if w.WorkerID() != 1 || w.Status().Node != p {
		t.Errorf("Claim() = %d at %s, want 1 at %s", w.WorkerID(), w.Status().Node, p)
	}
}

// TestNamespaceExhausted: when the namespace's counter is past 1023, Claim refuses and says why.
func TestNamespaceExhausted(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	conn := zktest.Conn(t, addr)
	// Push the namespace's sequence counter (the parent's cversion) to 1024 with dummy nodes,
	// deleting each so the tree stays small.
	leafNode(t, conn, name, "10.0.0.1:1", 0)
	for seq := int64(-1); seq < 1023; {
		p, err := conn.Create("/snowflake/"+name+"/forever/10.0.0.1:1-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		_, seq, _ = zkworker.ParseNodeName(filepath.Base(p))
		if err := conn.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}
	_, err := zkworker.Claim(context.Background(), options(t, addr, name, "8080"))
	if !errors.Is(err, zkworker.ErrWorkerIDExhausted) {
		t.Fatalf("Claim() = %v, want %v", err, zkworker.ErrWorkerIDExhausted)
	}
	for _, want := range []string{"1024", "1023", "leaf.name", "reuse an existing ip:port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Claim() error %q does not mention %q", err, want)
		}
	}
	children, _, _ := conn.Children("/snowflake/" + name + "/forever")
	if len(children) != 1 {
		t.Errorf("nodes left = %v, want only the first dummy (the unusable node deleted)", children)
	}
}

// TestLeafNameWithDash: Leaf splits the created path at its first `-`; leaf-go parses the last.
func TestLeafNameWithDash(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr) + "-with-dashes"
	t.Cleanup(func() {
		if err := zktest.DeleteTree(zktest.Conn(t, addr), "/snowflake/"+name); err != nil {
			t.Logf("delete /snowflake/%s: %v", name, err)
		}
	})
	claim(t, options(t, addr, name, "1"))
	w := claim(t, options(t, addr, name, "port-label-2"))
	if w.WorkerID() != 1 {
		t.Errorf("Claim().WorkerID() = %d, want 1", w.WorkerID())
	}
}

// TestClockBehindNode: a reused node whose timestamp is ahead of our clock is waited out when
// close, and stops the start when far.
func TestClockBehindNode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ahead   time.Duration
		wantErr error
	}{
		{name: "node 2 s ahead is waited out", ahead: 2 * time.Second},
		{name: "node 1 h ahead is fatal", ahead: time.Hour, wantErr: zkworker.ErrClockBehind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := zktest.Addr(t)
			name := zktest.Name(t, addr)
			conn := zktest.Conn(t, addr)
			now := time.Now()
			stamp := now.Add(tt.ahead)
			leafNode(t, conn, name, "127.0.0.1:8080", stamp.UnixMilli())
			o := options(t, addr, name, "8080")
			clock := newOffsetClock(now)
			o.Clock = clock
			w, err := zkworker.Claim(context.Background(), o)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Claim() = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer w.Close(context.Background())
			if clock.Now().Before(stamp.Truncate(time.Millisecond)) {
				t.Errorf("Claim() returned at %v, before the node's timestamp %v", clock.Now(), stamp)
			}
			if got, _ := w.Load(context.Background()); got.UnixMilli() != stamp.UnixMilli() {
				t.Errorf("Load() = %v, want the node's timestamp %v", got, stamp)
			}
		})
	}
}

// TestZooKeeperDown: with ZooKeeper unreachable at start, Claim fails closed (ErrUnreachable);
// with CacheStart, the cached worker ID is used and the clock is still checked against the
// cached mark.
func TestZooKeeperDown(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	o := options(t, addr, name, "8080")
	claim(t, options(t, addr, name, "8081")) // so that our ID is not 0
	w := claim(t, o)
	id := w.WorkerID()
	mark := time.Now().Add(time.Second)
	if err := w.Store(context.Background(), mark); err != nil {
		t.Fatal(err)
	}
	w.Close(context.Background())

	down := o
	down.Servers = []string{zktest.ClosedAddr(t)}
	down.ConnectTimeout = 300 * time.Millisecond

	t.Run("fails closed by default", func(t *testing.T) {
		w, err := zkworker.Claim(context.Background(), down)
		if err == nil {
			w.Close(context.Background())
		}
		if !errors.Is(err, zkworker.ErrUnreachable) || !strings.Contains(err.Error(), "--zk-cache-start") {
			t.Fatalf("Claim() with ZooKeeper down = %v, want %v naming --zk-cache-start", err, zkworker.ErrUnreachable)
		}
	})
	down.CacheStart = true

	t.Run("cached ID", func(t *testing.T) {
		w, err := zkworker.Claim(context.Background(), down)
		if err != nil {
			t.Fatalf("Claim() with ZooKeeper down = %v", err)
		}
		defer w.Close(context.Background())
		st := w.Status()
		if w.WorkerID() != id || st.Source != zkworker.SourceCache {
			t.Fatalf("Claim() = %d from %q, want %d from %q", w.WorkerID(), st.Source, id, zkworker.SourceCache)
		}
		if got, _ := w.Load(context.Background()); got.UnixMilli() != mark.UnixMilli() {
			t.Errorf("Load() = %v, want the cached mark %v", got, mark)
		}
		if time.Now().Before(mark.Truncate(time.Millisecond)) {
			t.Errorf("Claim() returned before the cached mark %v", mark)
		}
	})
	t.Run("clock far behind the cached mark", func(t *testing.T) {
		behind := down
		behind.Clock = clocktest.New(mark.Add(-time.Hour))
		_, err := zkworker.Claim(context.Background(), behind)
		if !errors.Is(err, zkworker.ErrClockBehind) {
			t.Fatalf("Claim() = %v, want %v", err, zkworker.ErrClockBehind)
		}
	})
	t.Run("no cache file", func(t *testing.T) {
		empty := down
		empty.CacheDir = t.TempDir()
		_, err := zkworker.Claim(context.Background(), empty)
		if !errors.Is(err, zkworker.ErrNoCache) {
			t.Fatalf("Claim() = %v, want %v", err, zkworker.ErrNoCache)
		}
	})
}

// TestHighWaterInNode: the generator's marks reach the node's timestamp (via the upload
// goroutine) and the cache file; a restarted generator loads them.
func TestHighWaterInNode(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	o := options(t, addr, name, "8080")
	o.HeartbeatInterval = 50 * time.Millisecond
	w := claim(t, o)
	g, err := snowflake.New(context.Background(), snowflake.Settings{WorkerID: w.WorkerID(), HighWater: w})
	if err != nil {
		t.Fatal(err)
	}
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mark := g.Stats().HighWater
	if !mark.After(snowflake.Decompose(id).Time()) {
		t.Fatalf("Stats().HighWater = %v, want after the ID's time", mark)
	}
	conn := zktest.Conn(t, addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, _, err := conn.Get(w.Status().Node)
		if err != nil {
			t.Fatal(err)
		}
		var ep struct{ Timestamp int64 }
		if err := json.Unmarshal(data, &ep); err != nil {
			t.Fatal(err)
		}
		if ep.Timestamp >= mark.UnixMilli() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node timestamp %d never reached the mark %d", ep.Timestamp, mark.UnixMilli())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.Close(context.Background())

	// Restart: the mark comes back from the node; a clock before it issues nothing.
	o.Clock = clocktest.New(mark.Add(-time.Hour))
	o.StartWait = -1
	if _, err := zkworker.Claim(context.Background(), o); !errors.Is(err, zkworker.ErrClockBehind) {
		t.Fatalf("Claim() with the clock 1 h behind the mark = %v, want %v", err, zkworker.ErrClockBehind)
	}
	o.Clock = nil
	o.StartWait = 0
	w2 := claim(t, o)
	if got, _ := w2.Load(context.Background()); got.UnixMilli() < mark.UnixMilli() {
		t.Errorf("Load() after restart = %v, want >= %v", got, mark)
	}
}

func TestClaimOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give zkworker.Options
	}{
		{name: "no servers", give: zkworker.Options{LeafName: "x", Port: "1", IP: "1.2.3.4"}},
		{name: "no name", give: zkworker.Options{Servers: []string{"127.0.0.1:1"}, Port: "1", IP: "1.2.3.4"}},
		{name: "slash in name", give: zkworker.Options{Servers: []string{"127.0.0.1:1"}, LeafName: "a/b", Port: "1", IP: "1.2.3.4"}},
		{name: "no port", give: zkworker.Options{Servers: []string{"127.0.0.1:1"}, LeafName: "x", IP: "1.2.3.4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := zkworker.Claim(context.Background(), tt.give); !errors.Is(err, zkworker.ErrOptions) {
				t.Fatalf("Claim() = %v, want %v", err, zkworker.ErrOptions)
			}
		})
	}
}
