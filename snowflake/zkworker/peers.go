package zkworker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/snowflake"
)

// Peer clock check at start (Options.MaxPeerClockSkew): the local clock is compared with the
// clocks the live peers of the namespace last reported, through snowflake.CheckPeerClock.
//
//   - A leaf-go peer is live when its live node exists; its clock is the live node's "clock"
//     field, which it rewrites at every heartbeat.
//   - A Java Leaf peer has no live node; it counts as live when its /forever node was written
//     within the last 3 heartbeat intervals (by ZooKeeper's clock: the node's mtime against the
//     mtime of a write of ours made just now), and its clock is the node's timestamp (Leaf
//     uploads System.currentTimeMillis()). Older nodes are dead peers and do not count.
//
// Each report is compared at the moment it was written: the node's mtime, moved onto the local
// clock by the offset between ZooKeeper's clock and ours measured with that write. So neither
// the reporting interval nor ZooKeeper's own clock counts as skew.

// javaLiveWindow is how many heartbeat intervals old a Java Leaf peer's upload may be and still
// count as live.
const javaLiveWindow = 3

// checkPeerClocks runs the peer clock check on conn after the claim (our live node exists).
func (w *Worker) checkPeerClocks(conn *zk.Conn) error {
	if w.opts.MaxPeerClockSkew <= 0 {
		return nil
	}
	before := w.opts.Clock.Now()
	stat, err := w.refreshLive(conn)
	if err != nil {
		return fmt.Errorf("peer clock check: write %s: %w", w.liveNode(), err)
	}
	after := w.opts.Clock.Now()
	local := before.Add(after.Sub(before) / 2)
	zkNow := time.UnixMilli(stat.Mtime)
	toLocal := local.Sub(zkNow) // local clock − ZooKeeper's clock
	children, _, err := conn.Children(w.foreverPath())
	if err != nil {
		return fmt.Errorf("peer clock check: list %s: %w", w.foreverPath(), err)
	}
	var peers []snowflake.Peer
	for _, child := range children {
		addr, n, ok := ParseNodeName(child)
		if !ok || w.foreverPath()+"/"+child == w.node || n == w.id {
			continue
		}
		held, lstat, err := conn.Get(w.livePath() + "/" + strconv.FormatInt(n, 10))
		if err == nil {
			var h Holder
			if json.Unmarshal(held, &h) == nil && h.Clock > 0 && h.Address == addr {
				peers = append(peers, snowflake.Peer{Name: fmt.Sprintf("%s (worker %d)", addr, n),
					Reported: time.UnixMilli(h.Clock), ReadAt: time.UnixMilli(lstat.Mtime).Add(toLocal)})
			}
			continue
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("peer clock check: read live node of worker %d: %w", n, err)
		}
		data, fstat, err := conn.Get(w.foreverPath() + "/" + child)
		if err != nil {
			continue // deleted meanwhile
		}
		if zkNow.Sub(time.UnixMilli(fstat.Mtime)) > javaLiveWindow*w.opts.HeartbeatInterval {
			continue // no upload lately: not a live peer
		}
		var ep endpoint
		if json.Unmarshal(data, &ep) != nil || ep.Timestamp <= 0 {
			continue
		}
		peers = append(peers, snowflake.Peer{Name: fmt.Sprintf("%s (worker %d, no live node: Java Leaf?)", addr, n),
			Reported: time.UnixMilli(ep.Timestamp), ReadAt: time.UnixMilli(fstat.Mtime).Add(toLocal)})
	}
	if err := snowflake.CheckPeerClock(peers, w.opts.MaxPeerClockSkew); err != nil {
		return err
	}
	if len(peers) > 0 {
		w.log.Info("zkworker: clock agrees with the live peers", "peers", len(peers), "max_skew", w.opts.MaxPeerClockSkew)
	}
	return nil
}

// refreshLive rewrites our live node with the current clock (Holder.Clock), if this session
// still owns it, and returns its new Stat (whose Mtime is ZooKeeper's clock at the write).
func (w *Worker) refreshLive(conn *zk.Conn) (*zk.Stat, error) {
	node := w.liveNode()
	_, stat, err := conn.Get(node)
	if err != nil {
		return nil, err
	}
	if stat.EphemeralOwner != conn.SessionID() {
		return nil, fmt.Errorf("%s belongs to session 0x%x, not ours", node, stat.EphemeralOwner)
	}
	return conn.Set(node, w.holderData(), stat.Version)
}
