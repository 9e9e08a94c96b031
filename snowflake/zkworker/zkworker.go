// Package zkworker claims a snowflake worker ID in ZooKeeper exactly the way Meituan Leaf's
// SnowflakeZookeeperHolder does, so that Java Leaf nodes and leaf-go nodes can share one
// namespace, and it keeps the generator's time high-water mark in the claimed node.
//
// # ZooKeeper layout (Leaf's)
//
//	/snowflake/<leaf.name>/forever/<ip>:<port>-<10-digit sequence>    persistent sequential
//	data: {"ip":"10.0.0.7","port":"8080","timestamp":1700000000000}  (port is a string)
//
// The node's sequence number is the worker ID. A node whose <ip>:<port> matches ours is reused
// with its number; otherwise a new sequential node is created. Numbers are never reused (the
// parent's counter only grows), so a namespace through which more than 1024 addresses have passed
// runs out: Claim refuses with ErrWorkerIDExhausted and says what to do. Every 3 s a goroutine
// owned by the Worker uploads the node's timestamp again (Leaf's ScheduledUploadData).
//
// After a successful claim the worker ID is cached in
// <tmpdir>/<leaf.name>/leafconf/<port>/workerID.properties (Leaf's file, `workerID=<n>`). When
// ZooKeeper cannot be reached at start, Claim falls back to that file, as Leaf does.
//
// # Differences from Leaf (bug fixes)
//
//   - The number is parsed from the last `-` of the node name, so a leaf.name (or port label)
//     containing `-` works; Leaf splits the full path at the first `-` and fails.
//   - The first node of a namespace gets its own number too (Leaf assumes 0).
//   - A reused node (or cache file) whose timestamp is ahead of our clock is waited out for up to
//     Options.StartWait and is otherwise a fatal error (ErrClockBehind); Leaf logs it, falls back
//     to the cache file and starts anyway.
//   - The timestamp is a high-water mark: Worker implements snowflake.HighWater. The node and
//     the cache file (extra line `timestamp=<ms>`, ignored by Leaf) hold the highest millisecond
//     the generator may have reached, which lies up to snowflake.DefaultHighWaterWindow ahead of
//     the clock; a restart waits until its clock has passed it. (A Java Leaf node restarting on
//     the same ip:port within that window refuses its ZooKeeper claim, as it should.)
//   - Only connection failures fall back to the cache file; every other error stops the start.
//   - A namespace that lost its nodes (ZooKeeper's data lost, or a new ensemble) while servers
//     run does not hand their worker IDs out again as far as it can be helped: a running server
//     whose upload finds its node gone creates it again under the same name (after opening a new
//     connection when the old one has had no session for two session timeouts: a new ensemble
//     refuses a client that has seen a later zxid); a starting server whose address has no node
//     takes back the worker ID of its cache file when no other node holds it; and a sequential
//     number that another address's node holds is never taken. Leaf re-uses such numbers: a
//     server restarted after the loss draws 0, 1, … again while others still issue with them.
//     A brand-new server that starts before a running one has re-registered can still draw that
//     one's number; restart or wait one heartbeat interval after ZooKeeper comes back.
package zkworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/internal/atomicfile"
	"github.com/leaf-go/leaf/snowflake"
)

var (
	// ErrOptions is returned by Claim for missing or malformed Options.
	ErrOptions = errors.New("zkworker: invalid options")
	// ErrWorkerIDExhausted is returned by Claim when the node's sequence number is larger than
	// the layout's largest worker ID (1023 by default).
	ErrWorkerIDExhausted = errors.New("zkworker: no worker ID left in the namespace")
	// ErrClockBehind is returned by Claim when the clock is behind the timestamp stored in the
	// reused node or the cache file by more than Options.StartWait (or still behind after
	// waiting): an earlier run of this address may have issued IDs up to that time.
	ErrClockBehind = errors.New("zkworker: clock behind the stored timestamp")
	// ErrNoCache is returned by Claim when ZooKeeper is unreachable and no cache file exists.
	ErrNoCache = errors.New("zkworker: ZooKeeper unreachable and no cached worker ID")
	// ErrNodeData is returned by Claim when a reused node's data is not Leaf's JSON, or the cache
	// file is not a valid properties file with a workerID.
	ErrNodeData = errors.New("zkworker: malformed stored data")
)

// Defaults used by Claim for zero Options fields.
const (
	// DefaultConnectTimeout is how long Claim waits for a ZooKeeper session before it falls back
	// to the cache file: 10 s, Leaf's Curator connectionTimeoutMs.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultSessionTimeout is the ZooKeeper session timeout: 6 s, Leaf's sessionTimeoutMs.
	DefaultSessionTimeout = 6 * time.Second
	// DefaultHeartbeatInterval is how often the node's timestamp is uploaded: 3 s, as Leaf.
	DefaultHeartbeatInterval = 3 * time.Second
	// DefaultStartWait is the longest Claim waits for the clock to pass a stored timestamp before
	// it fails: the generator's default high-water window plus 1 s.
	DefaultStartWait = snowflake.DefaultHighWaterWindow + time.Second
)

// Options configure Claim.
type Options struct {
	// Servers are the ZooKeeper addresses, host:port (Leaf's leaf.snowflake.zk.address split at
	// commas). Required.
	Servers []string
	// LeafName is Leaf's leaf.name, the namespace under /snowflake. Required; must not contain
	// `/`. May contain `-`.
	LeafName string
	// IP is the address registered in the node name and data. Empty means the first
	// non-loopback IPv4 address of an up interface, as Leaf's Utils.getIp.
	IP string
	// Port is the port label registered with the IP (Leaf's leaf.snowflake.port). Required.
	// Together IP:Port identify this node across restarts.
	Port string
	// Layout bounds the worker ID (0..Layout.MaxWorker()); zero means snowflake.DefaultLayout().
	Layout snowflake.Layout
	// Clock reads the time for node timestamps and the start check; nil means
	// snowflake.SystemClock{}.
	Clock snowflake.Clock
	// CacheDir is the directory of Leaf's cache file; empty means os.TempDir() (Java's
	// java.io.tmpdir on Linux is /tmp too).
	CacheDir string
	// ConnectTimeout bounds the wait for a ZooKeeper session; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// SessionTimeout is the ZooKeeper session timeout; 0 means DefaultSessionTimeout.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the node's timestamp is uploaded; 0 means
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// StartWait is the longest Claim waits for the clock to pass the stored timestamp (a quick
	// restart finds a mark up to the high-water window ahead); 0 means DefaultStartWait, negative
	// means do not wait.
	StartWait time.Duration
	// Logger receives warnings (fallback to the cache, failed uploads); nil means slog.Default().
	Logger *slog.Logger
}

// Source names where a Worker's ID came from.
const (
	SourceZooKeeper = "zookeeper"
	SourceCache     = "cache"
)

// Worker is a claimed worker ID. It is also the generator's snowflake.HighWater: the mark is
// kept in the ZooKeeper node's timestamp and in the cache file. Close stops the upload goroutine
// and the ZooKeeper session (the persistent node stays, as in Leaf). Safe for concurrent use.
type Worker struct {
	opts      Options
	id        int64
	source    string
	addr      string // ip:port
	node      string // full node path; "" when from the cache
	cachePath string
	loaded    time.Time // the mark found at claim time
	log       *slog.Logger

	// conn is the ZooKeeper connection, nil when from the cache. Claim sets it; afterwards only
	// the upload goroutine replaces it (reconnect).
	conn   atomic.Pointer[zk.Conn]
	cancel context.CancelFunc
	done   chan struct{} // closed when the upload goroutine has returned
	kick   chan struct{} // buffer 1: upload now (a new mark was stored)
	close  sync.Once

	storeMu sync.Mutex // serialises Store's cache-file writes

	mark       atomic.Int64 // highest stored mark, Unix ms
	uploaded   atomic.Int64 // highest timestamp written to the node, Unix ms
	lastUpload atomic.Int64 // wall time of the last successful upload, Unix ms
	uploadErr  atomic.Pointer[string]
}

var _ snowflake.HighWater = (*Worker)(nil)

// endpoint is the node data, field for field and in order as Leaf's Endpoint serialised by
// Jackson: {"ip":"…","port":"…","timestamp":<ms>}.
type endpoint struct {
	IP        string `json:"ip"`
	Port      string `json:"port"`
	Timestamp int64  `json:"timestamp"`
}

// Claim claims a worker ID for Options.IP:Options.Port under /snowflake/<LeafName>/forever,
// reusing this address's node if it exists. It checks the clock against the stored timestamp
// (waiting up to StartWait), writes the cache file and starts the upload goroutine. When no
// ZooKeeper session can be had within ConnectTimeout (or ctx ends first), it uses the cache
// file instead, with the same clock check. Errors: ErrOptions, ErrWorkerIDExhausted,
// ErrClockBehind, ErrNoCache, ErrNodeData, ZooKeeper and file errors.
func Claim(ctx context.Context, o Options) (*Worker, error) {
	if err := o.normalise(); err != nil {
		return nil, err
	}
	w := &Worker{
		opts:      o,
		addr:      o.IP + ":" + o.Port,
		cachePath: filepath.Join(o.CacheDir, o.LeafName, "leafconf", o.Port, "workerID.properties"),
		log:       o.Logger,
		done:      make(chan struct{}),
		kick:      make(chan struct{}, 1),
	}
	conn, connErr := w.connect(ctx)
	if connErr != nil {
		w.log.Warn("zkworker: ZooKeeper unreachable, using the cached worker ID",
			"servers", o.Servers, "err", connErr, "cache", w.cachePath)
		if err := w.fromCache(ctx); err != nil {
			return nil, fmt.Errorf("%w (ZooKeeper: %v)", err, connErr)
		}
		close(w.done)
		return w, nil
	}
	if err := w.claimNode(ctx, conn); err != nil {
		conn.Close()
		if unreachable(err) {
			w.log.Warn("zkworker: ZooKeeper lost during the claim, using the cached worker ID", "err", err, "cache", w.cachePath)
			if cerr := w.fromCache(ctx); cerr != nil {
				return nil, fmt.Errorf("%w (ZooKeeper: %v)", cerr, err)
			}
			close(w.done)
			return w, nil
		}
		return nil, err
	}
	w.conn.Store(conn)
	var hbCtx context.Context
	hbCtx, w.cancel = context.WithCancel(context.Background())
	go w.heartbeat(hbCtx)
	return w, nil
}

func (o *Options) normalise() error {
	switch {
	case len(o.Servers) == 0:
		return fmt.Errorf("%w: no ZooKeeper servers", ErrOptions)
	case o.LeafName == "" || strings.Contains(o.LeafName, "/"):
		return fmt.Errorf("%w: leaf.name %q must be non-empty and contain no '/'", ErrOptions, o.LeafName)
	case o.Port == "" || strings.ContainsAny(o.Port, "/"):
		return fmt.Errorf("%w: port %q must be non-empty and contain no '/'", ErrOptions, o.Port)
	case strings.ContainsAny(o.IP, "/"):
		return fmt.Errorf("%w: ip %q contains '/'", ErrOptions, o.IP)
	}
	if o.Layout == (snowflake.Layout{}) {
		o.Layout = snowflake.DefaultLayout()
	}
	if o.Clock == nil {
		o.Clock = snowflake.SystemClock{}
	}
	if o.CacheDir == "" {
		o.CacheDir = os.TempDir()
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.StartWait == 0 {
		o.StartWait = DefaultStartWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.IP == "" {
		ip, err := firstIPv4()
		if err != nil {
			return fmt.Errorf("%w: no IP given and %v", ErrOptions, err)
		}
		o.IP = ip
	}
	return nil
}

// firstIPv4 returns the first non-loopback IPv4 address of an up interface, as Leaf's
// Utils.getIp.
func firstIPv4() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 address found; set the IP to advertise")
}

// zkLogger sends go-zookeeper's log lines to slog at debug level.
type zkLogger struct{ l *slog.Logger }

// Printf implements zk.Logger.
func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}

// connect opens a session, waiting at most ConnectTimeout and until ctx ends.
func (w *Worker) connect(ctx context.Context) (*zk.Conn, error) {
	conn, events, err := zk.Connect(w.opts.Servers, w.opts.SessionTimeout,
		zk.WithLogger(zkLogger{w.log}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(w.opts.ConnectTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return nil, zk.ErrClosing
			}
			if ev.State == zk.StateHasSession {
				go drain(events)
				return conn, nil
			}
		case <-timer.C:
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session within %v: %w", w.opts.ConnectTimeout, zk.ErrNoServer)
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
}

// drain empties the session's event channel until the connection closes it. go-zookeeper drops
// events when the channel is full, so this only keeps the log quiet; it ends with Conn.Close.
func drain(events <-chan zk.Event) {
	for range events {
	}
}

// unreachable reports whether err means the ZooKeeper ensemble cannot be reached (fall back to
// the cache) rather than a refusal (fatal).
func unreachable(err error) bool {
	return errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}

// foreverPath returns /snowflake/<leaf.name>/forever (Leaf's PATH_FOREVER).
func (w *Worker) foreverPath() string { return "/snowflake/" + w.opts.LeafName + "/forever" }

// claimNode finds or creates this address's node and checks its timestamp.
func (w *Worker) claimNode(ctx context.Context, conn *zk.Conn) error {
	forever := w.foreverPath()
	if err := ensurePath(conn, forever); err != nil {
		return fmt.Errorf("create %s: %w", forever, err)
	}
	children, _, err := conn.Children(forever)
	if err != nil {
		return fmt.Errorf("list %s: %w", forever, err)
	}
	var (
		found bool
		name  string
		id    int64
	)
	taken := map[int64]string{} // worker ID → a node of another address
	for _, child := range children {
		addr, n, ok := ParseNodeName(child)
		if !ok {
			w.log.Warn("zkworker: ignoring a node that is not <ip>:<port>-<sequence>", "node", forever+"/"+child)
			continue
		}
		if addr != w.addr {
			taken[n] = child
		}
		if addr == w.addr && (!found || n < id) {
			if found {
				w.log.Warn("zkworker: several nodes for one address; using the lowest number", "addr", addr)
			}
			found, name, id = true, child, n
		}
	}
	now := w.opts.Clock.Now()
	if !found {
		data, _ := json.Marshal(endpoint{IP: w.opts.IP, Port: w.opts.Port, Timestamp: now.UnixMilli()})
		created, n, err := w.createNode(conn, data, taken)
		if err != nil {
			return err
		}
		if err := w.checkRange(n, created); err != nil {
			if derr := conn.Delete(created, -1); derr != nil {
				w.log.Warn("zkworker: could not delete the unusable node", "node", created, "err", derr)
			}
			return err
		}
		w.id, w.node = n, created
		w.uploaded.Store(now.UnixMilli())
	} else {
		node := forever + "/" + name
		if err := w.checkRange(id, node); err != nil {
			return err
		}
		data, _, err := conn.Get(node)
		if err != nil {
			return fmt.Errorf("read %s: %w", node, err)
		}
		var ep endpoint
		if err := json.Unmarshal(data, &ep); err != nil {
			return fmt.Errorf("%w: node %s holds %q, not Leaf's {\"ip\",\"port\",\"timestamp\"} JSON: %v", ErrNodeData, node, data, err)
		}
		w.id, w.node = id, node
		w.uploaded.Store(ep.Timestamp)
		w.loaded = time.UnixMilli(ep.Timestamp)
	}
	w.source = SourceZooKeeper
	// The cache file's mark counts too when it belongs to the same worker ID.
	if cid, cmark, err := readCache(w.cachePath); err == nil && cid == w.id && cmark.After(w.loaded) {
		w.loaded = cmark
	}
	if err := w.waitForClock(ctx, w.loaded, w.node); err != nil {
		return err
	}
	w.mark.Store(max(w.loaded.UnixMilli(), now.UnixMilli()))
	if err := w.writeCache(w.mark.Load()); err != nil {
		return fmt.Errorf("write cache file: %w", err)
	}
	return nil
}

// createNode creates this address's node when the namespace has none. Leaf creates a sequential
// node, and so does createNode, with two fixes for a namespace that lost its nodes (ZooKeeper's
// data lost or migrated without it, so the sequence counter starts again at 0 while servers
// still issue IDs with their old numbers):
//
//   - when the cache file names the worker ID this address had, and no other address's node
//     holds that number, the node is created again under that number (the name Leaf would have
//     given it), so a restart keeps its worker ID instead of drawing a low number that a
//     running server may still use;
//   - a sequential number that another address's node already holds is never taken: the node
//     is deleted and created again, which moves the counter on.
//
// taken maps worker IDs to the nodes of other addresses.
func (w *Worker) createNode(conn *zk.Conn, data []byte, taken map[int64]string) (string, int64, error) {
	forever := w.foreverPath()
	if cid, _, err := readCache(w.cachePath); err == nil && cid <= w.opts.Layout.MaxWorker() {
		if other, ok := taken[cid]; !ok {
			node := fmt.Sprintf("%s/%s-%010d", forever, w.addr, cid)
			_, err := conn.Create(node, data, 0, zk.WorldACL(zk.PermAll))
			if err == nil {
				w.log.Warn("zkworker: this address had no node; created it again with the worker ID of the cache file",
					"node", node, "cache", w.cachePath)
				return node, cid, nil
			}
			if !errors.Is(err, zk.ErrNodeExists) {
				return "", 0, fmt.Errorf("create node %s: %w", node, err)
			}
		} else {
			w.log.Warn("zkworker: the cached worker ID is held by another address's node; claiming a new one",
				"worker_id", cid, "node", forever+"/"+other, "cache", w.cachePath)
		}
	}
	for range w.opts.Layout.MaxWorker() + 2 {
		created, err := conn.Create(forever+"/"+w.addr+"-", data, zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			return "", 0, fmt.Errorf("create node for %s: %w", w.addr, err)
		}
		_, n, ok := ParseNodeName(path.Base(created))
		if !ok {
			return "", 0, fmt.Errorf("%w: created node %s has no sequence number", ErrNodeData, created)
		}
		other, dup := taken[n]
		if !dup || n > w.opts.Layout.MaxWorker() {
			return created, n, nil
		}
		w.log.Warn("zkworker: the sequence number is already held by another address's node (the namespace lost its nodes once); drawing again",
			"node", created, "held_by", forever+"/"+other)
		if err := conn.Delete(created, -1); err != nil {
			return "", 0, fmt.Errorf("delete node %s: %w", created, err)
		}
	}
	return "", 0, fmt.Errorf("%w: no free sequence number under %s", ErrWorkerIDExhausted, forever)
}

func (w *Worker) checkRange(n int64, node string) error {
	if maxID := w.opts.Layout.MaxWorker(); n > maxID {
		return fmt.Errorf("%w: node %s has sequence %d, above the largest worker ID %d. "+
			"ZooKeeper numbers every new ip:port in a namespace once and never reuses numbers, so "+
			"%d addresses have registered under %s. Either reuse an existing ip:port (a stable IP "+
			"and port, e.g. a StatefulSet), start this node with a new leaf.name (a fresh namespace "+
			"whose IDs cannot collide only if no old node of this namespace will issue IDs again), "+
			"or use the static or SQL worker-ID source", ErrWorkerIDExhausted, node, n, maxID, n, w.foreverPath())
	}
	return nil
}

// waitForClock waits until the clock has passed mark, for at most StartWait; from is named in
// the error.
func (w *Worker) waitForClock(ctx context.Context, mark time.Time, from string) error {
	if mark.IsZero() {
		return nil
	}
	var waited time.Duration
	for {
		behind := mark.Sub(w.opts.Clock.Now())
		if behind < 0 {
			return nil
		}
		if waited+behind > w.opts.StartWait {
			return fmt.Errorf("%w: the clock reads %s, %v behind the timestamp %s stored in %s by an "+
				"earlier run of %s; IDs issued now could repeat that run's IDs, so this node refuses to "+
				"start (Leaf would start anyway). Fix the clock (NTP), or wait until it has passed the "+
				"timestamp and restart", ErrClockBehind, w.opts.Clock.Now().UTC().Format(time.RFC3339Nano),
				behind, mark.UTC().Format(time.RFC3339Nano), from, w.addr)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		step := min(behind+time.Millisecond, 100*time.Millisecond)
		w.opts.Clock.Sleep(step)
		waited += step
	}
}

// ensurePath creates p and its parents as empty persistent nodes where missing (Curator's
// creatingParentsIfNeeded).
func ensurePath(conn *zk.Conn, p string) error {
	cur := ""
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		cur += "/" + part
		_, err := conn.Create(cur, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// ParseNodeName splits a node name <ip>:<port>-<sequence> at its last `-` and returns the
// address and the sequence number. ok is false when there is no `-` or the part after it is not
// a non-negative decimal number.
func ParseNodeName(name string) (addr string, seq int64, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return name[:i], n, true
}

// fromCache takes the worker ID from the cache file and checks the clock against its mark.
func (w *Worker) fromCache(ctx context.Context) error {
	id, mark, err := readCache(w.cachePath)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist; start once with ZooKeeper reachable", ErrNoCache, w.cachePath)
	}
	if err != nil {
		return err
	}
	if err := w.checkRange(id, w.cachePath); err != nil {
		return err
	}
	if mark.IsZero() {
		w.log.Warn("zkworker: the cache file holds no timestamp (written by Leaf?); the clock cannot be checked", "cache", w.cachePath)
	}
	if err := w.waitForClock(ctx, mark, w.cachePath); err != nil {
		return err
	}
	w.id, w.source, w.loaded, w.node = id, SourceCache, mark, ""
	w.uploaded.Store(0)
	if !mark.IsZero() {
		w.mark.Store(mark.UnixMilli())
	}
	return nil
}

// readCache parses the properties file: workerID=<n> and optionally timestamp=<ms>.
func readCache(p string) (id int64, mark time.Time, err error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, time.Time{}, err
	}
	props := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	id, err = strconv.ParseInt(props["workerID"], 10, 64)
	if err != nil || id < 0 {
		return 0, time.Time{}, fmt.Errorf("%w: %s: workerID=%q", ErrNodeData, p, props["workerID"])
	}
	if ts, ok := props["timestamp"]; ok {
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ms < 0 {
			return 0, time.Time{}, fmt.Errorf("%w: %s: timestamp=%q", ErrNodeData, p, ts)
		}
		mark = time.UnixMilli(ms)
	}
	return id, mark, nil
}

// writeCache writes Leaf's cache file plus the mark.
func (w *Worker) writeCache(markMillis int64) error {
	content := fmt.Sprintf("workerID=%d\ntimestamp=%d\n", w.id, markMillis)
	return atomicfile.Write(w.cachePath, []byte(content))
}

// heartbeat uploads the node's timestamp every HeartbeatInterval and when kicked, until ctx
// ends; then it uploads a mark that is not in the node yet, and returns.
func (w *Worker) heartbeat(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.opts.HeartbeatInterval)
	defer t.Stop()
	lastSession := time.Now()
	for {
		select {
		case <-ctx.Done():
			if w.mark.Load() > w.uploaded.Load() {
				w.upload()
			}
			return
		case <-t.C:
		case <-w.kick:
		}
		// Without a session an upload would wait for one: up to 40 s when a
		// connection sent while ZooKeeper was starting is never answered
		// (go-zookeeper waits 10 read timeouts for the connect response), and
		// the reconnect below would wait with it.
		if w.conn.Load().State() != zk.StateHasSession {
			w.uploadFailed(zk.ErrNoServer)
			if since := time.Since(lastSession); since > 2*w.opts.SessionTimeout {
				w.reconnect(since)
				lastSession = time.Now()
			}
			t.Reset(min(w.opts.HeartbeatInterval, time.Second)) // upload soon after the session is back
			continue
		}
		if time.Since(lastSession) > w.opts.HeartbeatInterval {
			t.Reset(w.opts.HeartbeatInterval)
		}
		lastSession = time.Now()
		w.upload()
	}
}

// reconnect replaces a connection that has had no session for long. go-zookeeper retries
// forever with the last zxid it has seen, and a ZooKeeper that lost its data (a new ensemble)
// refuses such a client for good ("client must try another server"); a new connection starts
// from zxid 0. The node is created again by the next upload.
func (w *Worker) reconnect(since time.Duration) {
	conn, events, err := zk.Connect(w.opts.Servers, w.opts.SessionTimeout,
		zk.WithLogger(zkLogger{w.log}), zk.WithLogInfo(false))
	if err != nil {
		w.log.Warn("zkworker: new ZooKeeper connection failed", "err", err)
		return
	}
	go drain(events)
	w.log.Warn("zkworker: no ZooKeeper session for a while; opening a new connection", "without_session", since.Round(time.Millisecond))
	w.conn.Swap(conn).Close()
}

// upload writes max(mark, now, last upload) to the node; it never lowers the timestamp (Leaf
// skips an upload when the clock is behind the last one).
func (w *Worker) upload() {
	ts := max(w.mark.Load(), w.opts.Clock.Now().UnixMilli(), w.uploaded.Load())
	data, _ := json.Marshal(endpoint{IP: w.opts.IP, Port: w.opts.Port, Timestamp: ts})
	conn := w.conn.Load()
	_, err := conn.Set(w.node, data, -1)
	if errors.Is(err, zk.ErrNoNode) {
		err = w.recreate(conn, data)
	}
	if err != nil {
		w.uploadFailed(err)
		return
	}
	w.uploaded.Store(ts)
	w.lastUpload.Store(w.opts.Clock.Now().UnixMilli())
	if prev := w.uploadErr.Swap(nil); prev != nil {
		w.log.Info("zkworker: uploading the node timestamp works again", "node", w.node)
	}
}

// recreate creates the node again under its own name (and so with its worker ID) after an upload
// found it gone: ZooKeeper lost its data, and without the node a starting server could draw this
// worker ID. A number that another address registered meanwhile is logged as an error: two live
// servers then share a worker ID, and one of them must be stopped.
func (w *Worker) recreate(conn *zk.Conn, data []byte) error {
	if err := ensurePath(conn, w.foreverPath()); err != nil {
		return fmt.Errorf("node %s gone; create %s: %w", w.node, w.foreverPath(), err)
	}
	if _, err := conn.Create(w.node, data, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("node %s gone; create it again: %w", w.node, err)
	}
	w.log.Warn("zkworker: the node was gone (ZooKeeper lost its data?); created it again with this worker ID", "node", w.node)
	children, _, err := conn.Children(w.foreverPath())
	if err != nil {
		return nil // the node is back; the check is best effort
	}
	for _, child := range children {
		if addr, n, ok := ParseNodeName(child); ok && n == w.id && addr != w.addr {
			w.log.Error("zkworker: another address registered this worker ID while the node was gone: two live servers share it and may issue the same IDs; stop one of them",
				"worker_id", w.id, "node", w.node, "other", w.foreverPath()+"/"+child)
		}
	}
	return nil
}

// uploadFailed records err as the upload error, logging the first of a series.
func (w *Worker) uploadFailed(err error) {
	msg := err.Error()
	if prev := w.uploadErr.Swap(&msg); prev == nil {
		w.log.Warn("zkworker: uploading the node timestamp failed; IDs are still issued, the mark is kept in the cache file",
			"node", w.node, "err", err)
	}
}

// ID returns the claimed worker ID.
func (w *Worker) ID() int64 { return w.id }

// Load returns the mark found at claim time: the reused node's timestamp or the cache file's,
// whichever is later (zero for a new node without a cache). Claim has already waited for the
// clock to pass it. It implements snowflake.HighWater.
func (w *Worker) Load(context.Context) (time.Time, error) { return w.loaded, nil }

// Store writes mark to the cache file (durably, before it returns) and asks the upload goroutine
// to write it to the node at once. A ZooKeeper outage does not fail Store (Leaf keeps issuing
// IDs without ZooKeeper too); the cache file is the durable copy. It implements
// snowflake.HighWater.
func (w *Worker) Store(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	w.storeMu.Lock()
	defer w.storeMu.Unlock()
	if ms <= w.mark.Load() {
		return nil
	}
	if err := w.writeCache(ms); err != nil {
		return fmt.Errorf("write cache file: %w", err)
	}
	w.mark.Store(ms)
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return nil
}

// Status is a snapshot of a Worker for status pages.
type Status struct {
	// WorkerID is the claimed worker ID.
	WorkerID int64
	// Source is SourceZooKeeper or SourceCache.
	Source string
	// Address is the registered ip:port.
	Address string
	// Node is the full node path; empty when the ID came from the cache.
	Node string
	// CachePath is the cache file's path.
	CachePath string
	// State is the ZooKeeper session state (e.g. "StateHasSession"); empty without a session.
	State string
	// Mark is the highest stored high-water mark; Uploaded the highest timestamp in the node.
	Mark, Uploaded time.Time
	// LastUpload is when the node was last written; zero if never since the claim.
	LastUpload time.Time
	// UploadError is the last upload's error, empty when it succeeded.
	UploadError string
}

// Status returns a snapshot of the worker's state.
func (w *Worker) Status() Status {
	s := Status{
		WorkerID:  w.id,
		Source:    w.source,
		Address:   w.addr,
		Node:      w.node,
		CachePath: w.cachePath,
		Mark:      msTime(w.mark.Load()),
		Uploaded:  msTime(w.uploaded.Load()),
	}
	if conn := w.conn.Load(); conn != nil {
		s.State = conn.State().String()
		s.LastUpload = msTime(w.lastUpload.Load())
	}
	if p := w.uploadErr.Load(); p != nil {
		s.UploadError = *p
	}
	return s
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Close stops the upload goroutine (which first uploads a mark the node does not have yet),
// closes the ZooKeeper session and waits for the goroutine. An upload hung on a broken connection
// is cut off after the session timeout. The node stays (it is persistent, as in Leaf). Safe to
// call more than once.
func (w *Worker) Close() error {
	w.close.Do(func() {
		if w.cancel != nil {
			w.cancel()
		}
		if conn := w.conn.Load(); conn != nil {
			select {
			case <-w.done:
			case <-time.After(w.opts.SessionTimeout):
			}
			w.conn.Load().Close()
			<-w.done
			w.conn.Load().Close() // a reconnect may have replaced it meanwhile
		}
		<-w.done
	})
	return nil
}
