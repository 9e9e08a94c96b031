package zkworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/internal/atomicfile"
	"github.com/leaf-go/leaf/snowflake/lease"
)

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
	// The node this address has under Leaf's naming if the number is ours: registerCached
	// checks it once ZooKeeper answers.
	w.id, w.source, w.loaded = id, SourceCache, mark
	w.node = fmt.Sprintf("%s/%s-%010d", w.foreverPath(), w.addr, id)
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

// registerCached runs for a worker started from the cache file (Options.CacheStart): it
// connects until ZooKeeper answers (or ctx ends), registers the cached worker ID (register),
// and then runs the heartbeat like a claimed worker. A failed registration loses the lease for
// good.
func (w *Worker) registerCached(ctx context.Context) {
	for {
		conn, err := w.connect(ctx)
		if ctx.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			close(w.done)
			return
		}
		if err != nil {
			continue // connect waited ConnectTimeout
		}
		w.conn.Store(conn)
		err = w.register(conn)
		if err == nil {
			w.log.Info("zkworker: ZooKeeper answers; the cached worker ID is registered and held as a lease", "worker_id", w.id, "node", w.node)
			w.heartbeat(ctx)
			return
		}
		if unreachable(err) && w.conflicted.Load() == nil {
			conn.Close()
			continue
		}
		_ = w.lose("cache-file start: " + err.Error()) // deletes our live node if we created it
		close(w.done)
		return
	}
}

// register checks the cached worker ID against ZooKeeper without waiting: this address's
// /forever node must carry the cached number (it is created with that number when the
// namespace has none for the address and no other address holds it), nobody may have written
// it lately, and the live node must be free; then the live node is created and the first
// contact starts the lease. Any conflict is an error.
func (w *Worker) register(conn *zk.Conn) error {
	forever := w.foreverPath()
	if err := ensurePath(conn, forever); err != nil {
		return fmt.Errorf("create %s: %w", forever, err)
	}
	children, _, err := conn.Children(forever)
	if err != nil {
		return fmt.Errorf("list %s: %w", forever, err)
	}
	found := false
	for _, child := range children {
		addr, n, ok := ParseNodeName(child)
		switch {
		case !ok:
		case addr == w.addr && n != w.id:
			return fmt.Errorf("this address's node %s/%s has number %d, not the cached worker ID %d", forever, child, n, w.id)
		case addr == w.addr:
			found = true
		case n == w.id:
			return fmt.Errorf("worker ID %d is registered by another address: %s/%s", w.id, forever, child)
		}
	}
	now := w.opts.Clock.Now()
	var (
		prev  *zk.Stat
		prevT int64
	)
	if found {
		data, stat, err := conn.Get(w.node)
		if err != nil {
			return fmt.Errorf("read %s: %w", w.node, err)
		}
		var ep endpoint
		if err := json.Unmarshal(data, &ep); err != nil {
			return fmt.Errorf("%w: node %s holds %q: %v", ErrNodeData, w.node, data, err)
		}
		if ep.Timestamp > w.mark.Load() && time.UnixMilli(ep.Timestamp).After(now) {
			return fmt.Errorf("the node %s holds the timestamp %d, ahead of this server's mark and clock: another process issued with worker ID %d", w.node, ep.Timestamp, w.id)
		}
		w.version.Store(stat.Version)
		w.written.Store(&data)
		w.uploaded.Store(ep.Timestamp)
		prev, prevT = stat, ep.Timestamp
	} else {
		data, _ := json.Marshal(endpoint{IP: w.opts.IP, Port: w.opts.Port, Timestamp: max(now.UnixMilli(), w.mark.Load())})
		if _, err := conn.Create(w.node, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			return fmt.Errorf("create node %s: %w", w.node, err)
		}
		w.version.Store(0)
		w.written.Store(&data)
	}
	if err := ensurePath(conn, w.livePath()); err != nil {
		return fmt.Errorf("create %s: %w", w.livePath(), err)
	}
	if _, err := conn.Create(w.liveNode(), w.holderData(), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		if errors.Is(err, zk.ErrNodeExists) {
			held, _, _ := conn.Get(w.liveNode())
			return fmt.Errorf("%w: the live node %s is held by %s", ErrWorkerIDHeld, w.liveNode(), describeHolder(held))
		}
		return fmt.Errorf("create %s: %w", w.liveNode(), err)
	}
	w.liveSession.Store(conn.SessionID())
	if prev != nil {
		// Written lately, and not by our last run (whose timestamp the cache file held)? A
		// live writer without a live node: a Java Leaf node on our ip:port.
		stat, err := w.refreshLive(conn)
		if err != nil {
			return fmt.Errorf("write %s: %w", w.liveNode(), err)
		}
		age := time.Duration(stat.Mtime-prev.Mtime) * time.Millisecond
		if age <= javaLiveWindow*w.opts.HeartbeatInterval && prevT != w.loaded.UnixMilli() {
			return fmt.Errorf("%w: the node %s was written %v ago by a process without a live node", ErrWorkerIDHeld, w.node, age)
		}
	}
	if _, err := w.startLease(context.Background(), lease.Read(w.clock), false); err != nil {
		return err
	}
	w.vetted.Store(true)
	return nil
}
