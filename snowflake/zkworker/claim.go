package zkworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/snowflake/lease"
)

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
		prev  *zk.Stat // the reused node's Stat
		prevT int64    // and its timestamp
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
	// After a data loss two addresses' nodes can carry one number (both drawn before either
	// held the live node). The one whose live node holds the number keeps it; ours, when
	// another address holds the live node, is deleted and a new number drawn.
	if other, dup := taken[id]; found && dup {
		if held, _, err := conn.Get(w.livePath() + "/" + strconv.FormatInt(id, 10)); err == nil {
			var h Holder
			if json.Unmarshal(held, &h) == nil && h.Address != w.addr {
				node := forever + "/" + name
				w.log.Warn("zkworker: this address's node carries a number that another address's node carries and holds; drawing a new one",
					"node", node, "other", forever+"/"+other, "holder", h.String())
				if err := conn.Delete(node, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return fmt.Errorf("delete %s: %w", node, err)
				}
				found = false
			}
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
		w.version.Store(0)
		w.written.Store(&data)
	} else {
		node := forever + "/" + name
		if err := w.checkRange(id, node); err != nil {
			return err
		}
		data, stat, err := conn.Get(node)
		if err != nil {
			return fmt.Errorf("read %s: %w", node, err)
		}
		var ep endpoint
		if err := json.Unmarshal(data, &ep); err != nil {
			return fmt.Errorf("%w: node %s holds %q, not Leaf's {\"ip\",\"port\",\"timestamp\"} JSON: %v", ErrNodeData, node, data, err)
		}
		w.id, w.node = id, node
		prev, prevT = stat, ep.Timestamp
		w.version.Store(stat.Version)
		w.uploaded.Store(ep.Timestamp)
		w.loaded = time.UnixMilli(ep.Timestamp)
	}
	w.source = SourceZooKeeper
	waited, err := w.takeLive(ctx, conn)
	if err != nil {
		return err
	}
	// A previous holder may still be issuing with this worker ID: wait it out (the lease
	// rule: a holder stops within the session timeout − Margin of its last contact, and every
	// contact now finds our live node).
	why := ""
	switch {
	case prev == nil:
		why = "no history: this address has no node (a new server, or ZooKeeper lost its data and a running server may hold the number)"
	case waited:
		why = "the worker ID's live node belonged to another session until just now"
	default:
		lately, age, err := w.writtenLately(conn, prev, prevT)
		if err != nil {
			return err
		}
		if lately {
			why = fmt.Sprintf("the node was written %v ago by a process without a live node", age.Round(time.Millisecond))
		}
	}
	if err := w.checkPeerClocks(conn); err != nil {
		return err
	}
	// The cache file's mark counts too when it belongs to the same worker ID; a refusal names
	// where the mark it waited for came from.
	from := w.node
	if cid, cmark, err := readCache(w.cachePath); err == nil && cid == w.id && cmark.After(w.loaded) {
		w.loaded, from = cmark, w.cachePath
	}
	if err := w.waitForClock(ctx, w.loaded, from); err != nil {
		return err
	}
	w.mark.Store(max(w.loaded.UnixMilli(), now.UnixMilli()))
	if err := w.writeCache(w.mark.Load()); err != nil {
		return fmt.Errorf("write cache file: %w", err)
	}
	// The lease starts with a contact; a claim that may follow a live holder is held back a
	// full session timeout + margin (the holder stops within the session timeout − margin of
	// its last contact, and every contact of it now finds our live node), and serves only
	// once the heartbeat has found the /forever node not written by anyone else meanwhile
	// (vetted).
	s, err := w.startLease(ctx, lease.Read(w.clock), why != "")
	if err != nil {
		return err
	}
	if why == "" {
		w.vetted.Store(true)
	} else {
		w.holdWhy = why
		w.log.Warn("zkworker: a previous holder of the worker ID may still be issuing; no snowflake IDs for a full session timeout + margin",
			"worker_id", w.id, "node", w.node, "reason", why, "wait", s.Policy().NoHistoryWait())
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
		other, ok := taken[cid]
		if held, _, err := conn.Get(w.livePath() + "/" + strconv.FormatInt(cid, 10)); err == nil && !ok {
			other, ok = "live node of "+describeHolder(held), true
		}
		if !ok {
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
		if !dup && n <= w.opts.Layout.MaxWorker() {
			if held, _, err := conn.Get(w.livePath() + "/" + strconv.FormatInt(n, 10)); err == nil {
				dup, other = true, "live node of "+describeHolder(held)
			}
		}
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
// creatingParentsIfNeeded). Their data is 0 bytes, not null, as Curator writes them: go-zookeeper
// sends a nil slice as null (length -1), which a Java client reads as data == null.
func ensurePath(conn *zk.Conn, p string) error {
	cur := ""
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		cur += "/" + part
		_, err := conn.Create(cur, []byte{}, 0, zk.WorldACL(zk.PermAll))
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

// TakenWorkers lists the worker IDs that a /forever node of Leaf's layout
// carries, this server's among them, for the free-worker-ID gauge. In that
// layout a number stays with its address after the server stops (Leaf never
// deletes a /forever node), so a number listed here is not free to another
// address even when no server holds its live node. Errors: the ZooKeeper
// list's, or an error when the worker has no connection (started from the
// cache file).
func (w *Worker) TakenWorkers(ctx context.Context) ([]int64, error) {
	conn := w.conn.Load()
	if conn == nil {
		return nil, errors.New("zkworker: no ZooKeeper connection")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	children, _, err := conn.Children(w.foreverPath())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", w.foreverPath(), err)
	}
	ids := make([]int64, 0, len(children))
	for _, child := range children {
		if _, n, ok := ParseNodeName(child); ok {
			ids = append(ids, n)
		}
	}
	return ids, nil
}
