package zkworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

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
