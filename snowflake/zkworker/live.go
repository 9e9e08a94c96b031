package zkworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/snowflake/lease"
)

// Exclusive holders: Leaf's /forever node says which ip:port owns a worker ID, but not whether a
// process is using it. Beside /forever (which stays exactly as Leaf has it, so Java Leaf nodes
// keep working in the same namespace) a live leaf-go holder keeps the ephemeral node
// /snowflake/<leaf.name>/live/<workerID>, created with its ZooKeeper session and holding
// [Holder]. A second process resolving to the same worker ID finds it and refuses to start.

var (
	// ErrWorkerIDHeld is returned by Claim when another live process holds the lease on the
	// worker ID (its live node exists and is not a crashed process's node that expires within
	// the session timeout, or a Java Leaf node writes the /forever node). The message names
	// the holder.
	ErrWorkerIDHeld = errors.New("zkworker: the worker ID is leased to another live process")
	// ErrConflict is what Worker.Ready returns (wrapped, with the reason) once the lease on the
	// worker ID is lost: the session ended (a new session, or none for a full session
	// timeout), the /forever node gone (ZooKeeper lost its data, or it was deleted), the live
	// node gone or owned by another session, or a timestamp written to the /forever node by
	// another process (a Java Leaf node, or a server on the same ip:port). The loss is final
	// for this Worker (Lost is closed); leaf-server claims again.
	ErrConflict = errors.New("zkworker: lease on the worker ID lost")
)

// noLease is the Expiry of a Worker without a conflict: far in the future, so that the
// generator treats the worker as a source with a lease (it asks on every ID) that never ends
// until a conflict sets it to the moment of the conflict.
var noLease = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Holder is the data of a live node, JSON-encoded: who holds the worker ID and since when.
type Holder struct {
	// Address is the registered ip:port (the /forever node's name without its sequence).
	Address string `json:"address"`
	// Host is the holder's host name (os.Hostname), PID its process ID.
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Since is when the holder claimed the worker ID, RFC 3339 in UTC.
	Since string `json:"since"`
	// Node is the holder's /forever node path.
	Node string `json:"node"`
	// Clock is the holder's clock, Unix ms, when it last wrote the node (at the claim and at
	// every heartbeat): what the peer clock check of a starting server compares with.
	Clock int64 `json:"clock"`
}

// String describes the holder for an operator.
func (h Holder) String() string {
	return fmt.Sprintf("%s (pid %d on host %s, since %s, node %s)", h.Address, h.PID, h.Host, h.Since, h.Node)
}

// livePath returns /snowflake/<leaf.name>/live.
func (w *Worker) livePath() string { return "/snowflake/" + w.opts.LeafName + "/live" }

// liveNode returns /snowflake/<leaf.name>/live/<workerID>.
func (w *Worker) liveNode() string { return w.livePath() + "/" + strconv.FormatInt(w.id, 10) }

// holderData returns this process's live-node data.
func (w *Worker) holderData() []byte {
	host, _ := os.Hostname()
	now := w.opts.Clock.Now()
	if w.since.IsZero() {
		w.since = now
	}
	b, _ := json.Marshal(Holder{Address: w.addr, Host: host, PID: os.Getpid(),
		Since: w.since.UTC().Format(time.RFC3339), Node: w.node, Clock: now.UnixMilli()})
	return b
}

// describeHolder reads a live node's data for a message.
func describeHolder(data []byte) string {
	var h Holder
	if err := json.Unmarshal(data, &h); err != nil || h.Address == "" {
		return fmt.Sprintf("%q", data)
	}
	return h.String()
}

// takeLive creates the live node of w.id with conn's session. A live node of another session
// may be a crashed process's (it disappears when ZooKeeper expires that session): takeLive
// waits up to SessionTimeout plus 2 s for it to go, and otherwise refuses with
// ErrWorkerIDHeld naming the holder. waited says whether it found such a node (so the last
// writer of the /forever node was a leaf-go process).
func (w *Worker) takeLive(ctx context.Context, conn *zk.Conn) (waited bool, err error) {
	if err := ensurePath(conn, w.livePath()); err != nil {
		return false, fmt.Errorf("create %s: %w", w.livePath(), err)
	}
	node := w.liveNode()
	data := w.holderData()
	deadline := time.Now().Add(w.opts.SessionTimeout + 2*time.Second)
	logged := false
	for {
		_, err := conn.Create(node, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			w.liveSession.Store(conn.SessionID())
			return logged, nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return false, fmt.Errorf("create %s: %w", node, err)
		}
		held, stat, err := conn.Get(node)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", node, err)
		}
		if stat.EphemeralOwner == conn.SessionID() {
			w.liveSession.Store(conn.SessionID())
			return logged, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%w: worker ID %d (address %s) is held by %s: its live node %s belongs to ZooKeeper session 0x%x, "+
				"which is still alive after %v. Two processes with one worker ID would issue duplicate IDs, so this one "+
				"refuses to start: stop the other one, or give this one another --advertise-ip/--snowflake-port",
				ErrWorkerIDHeld, w.id, w.addr, describeHolder(held), node, stat.EphemeralOwner, w.opts.SessionTimeout+2*time.Second)
		}
		if !logged {
			w.log.Warn("zkworker: the worker ID's live node exists; waiting for it to expire in case its holder crashed",
				"node", node, "holder", describeHolder(held), "wait", w.opts.SessionTimeout+2*time.Second)
			logged = true
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writtenLately reports whether the reused /forever node, whose Stat and timestamp Claim
// read, was written within the last three heartbeat intervals (by ZooKeeper's clock: against a
// write of our live node made now) by a process without a live node (a Java Leaf node, or a
// leaf-go holder whose live node was deleted), and not by this address's last run (the cache
// file holds that run's last timestamp). age is how long ago.
func (w *Worker) writtenLately(conn *zk.Conn, prev *zk.Stat, ts int64) (lately bool, age time.Duration, err error) {
	stat, err := w.refreshLive(conn)
	if err != nil {
		return false, 0, fmt.Errorf("write %s: %w", w.liveNode(), err)
	}
	age = time.Duration(stat.Mtime-prev.Mtime) * time.Millisecond
	if age > javaLiveWindow*w.opts.HeartbeatInterval {
		return false, age, nil
	}
	if cid, cmark, err := readCache(w.cachePath); err == nil && cid == w.id && cmark.UnixMilli() == ts {
		return false, age, nil // our own last write
	}
	return true, age, nil
}

// checkNotRewritten refuses the claim with ErrWorkerIDHeld when the /forever node was
// written, since Claim read or created it, by someone else: a live process without a live
// node (a Java Leaf node on our ip:port) holds the worker ID. why is the reason Claim waited.
func (w *Worker) checkNotRewritten(conn *zk.Conn, waited time.Duration, why string) error {
	data, now, err := conn.Get(w.node)
	if err != nil {
		return fmt.Errorf("read %s: %w", w.node, err)
	}
	if now.Version != w.version.Load() && !ours(data, w.written.Load(), w.attempted.Load()) {
		return fmt.Errorf("%w: the node %s of worker ID %d is written by a live process without a live node "+
			"(a Java Leaf node on %s?): written again within the %v this claim waited (%s; %s). Two processes "+
			"with one worker ID would issue duplicate IDs, so this one does not take the lease: stop the other one, or "+
			"give this one another --advertise-ip/--snowflake-port", ErrWorkerIDHeld, w.node, w.id, w.addr,
			waited, why, data)
	}
	return nil
}

// setNode writes data to the /forever node if nobody else wrote it since this process did
// (version check). A version mismatch whose data is not ours is a conflict: another process
// uploads timestamps to our node (a live Java Leaf node on the same ip:port). A gone node is
// a conflict too (ZooKeeper lost its data, or the node was deleted). It returns whether the
// write happened and the error of a failed write that is not a conflict.
func (w *Worker) setNode(conn *zk.Conn, data []byte) (bool, error) {
	w.nodeMu.Lock()
	defer w.nodeMu.Unlock()
	return w.setNodeLocked(conn, data)
}

func (w *Worker) setNodeLocked(conn *zk.Conn, data []byte) (bool, error) {
	w.attempted.Store(&data) // a write applied whose answer is lost must not look foreign
	stat, err := conn.Set(w.node, data, w.version.Load())
	switch {
	case err == nil:
		w.version.Store(stat.Version)
		w.written.Store(&data)
		return true, nil
	case errors.Is(err, zk.ErrNoNode):
		_ = w.lose(fmt.Sprintf("the node %s is gone: ZooKeeper lost its data or someone deleted it, and another "+
			"server may since have drawn worker ID %d", w.node, w.id))
		return false, nil
	case errors.Is(err, zk.ErrBadVersion):
		cur, stat, gerr := conn.Get(w.node)
		if gerr != nil {
			return false, fmt.Errorf("read %s after a version mismatch: %w", w.node, gerr)
		}
		if ours(cur, w.written.Load(), w.attempted.Load()) {
			// Our own write whose answer was lost (connection loss); take its version.
			w.version.Store(stat.Version)
			return w.setNodeLocked(conn, data)
		}
		_ = w.lose(fmt.Sprintf("another process wrote the node %s: %s (a Java Leaf node or a second server on %s)", w.node, cur, w.addr))
		return false, nil
	default:
		return false, err
	}
}

// ours reports whether data is one of our writes (the last confirmed or attempted one).
func ours(data []byte, writes ...*[]byte) bool {
	for _, p := range writes {
		if p != nil && bytes.Equal(data, *p) {
			return true
		}
	}
	return false
}

// lose records the first loss of the lease and returns it (wrapping ErrConflict and
// lease.ErrLeaseLost): Expiry becomes the past (so the generator refuses at once), Ready
// returns the reason, uploads and renewals stop, Lost is closed, and the live node is deleted
// when this session still owns it (this Worker never issues with the worker ID again, so it
// must not keep others out). Later losses return the first.
func (w *Worker) lose(reason string) error {
	err := fmt.Errorf("%w (%w): worker ID %d: %s; no snowflake IDs from this claim, the worker ID must be claimed again",
		ErrConflict, lease.ErrLeaseLost, w.id, reason)
	c := &conflictState{err: err, at: w.opts.Clock.Now()}
	if !w.conflicted.CompareAndSwap(nil, c) {
		return w.conflicted.Load().err
	}
	if s := w.sess.Load(); s != nil {
		_ = s.Lose(err)
	}
	close(w.lost)
	w.log.Error("zkworker: lease on the worker ID lost; snowflake IDs stopped", "worker_id", w.id, "reason", reason)
	if conn := w.conn.Load(); conn != nil && conn.State() == zk.StateHasSession {
		if _, stat, err := conn.Get(w.liveNode()); err == nil && stat.EphemeralOwner == conn.SessionID() {
			_ = conn.Delete(w.liveNode(), stat.Version)
		}
	}
	return err
}

// conflictState is a recorded conflict.
type conflictState struct {
	err error
	at  time.Time
}
