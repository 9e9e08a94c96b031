package zkworker

import (
	"context"
	"encoding/json"
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
			if since := time.Since(lastSession); since > w.opts.SessionTimeout {
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
// skips an upload when the clock is behind the last one). The write is conditional on the
// node's version (setNode), and the live node is checked after it (checkLive): a broken claim
// is a conflict, after which nothing is uploaded any more.
func (w *Worker) upload() {
	if w.conflicted.Load() != nil || w.final.Load() {
		return
	}
	ts := max(w.mark.Load(), w.opts.Clock.Now().UnixMilli(), w.uploaded.Load())
	data, _ := json.Marshal(endpoint{IP: w.opts.IP, Port: w.opts.Port, Timestamp: ts})
	conn := w.conn.Load()
	ok, err := w.setNode(conn, data)
	if err != nil {
		w.uploadFailed(err)
		return
	}
	if !ok { // a conflict
		return
	}
	w.uploaded.Store(ts)
	w.lastUpload.Store(w.opts.Clock.Now().UnixMilli())
	w.checkLive(conn)
	if w.conflicted.Load() != nil {
		return
	}
	if prev := w.uploadErr.Swap(nil); prev != nil {
		w.log.Info("zkworker: uploading the node timestamp works again", "node", w.node)
	}
}

// uploadFailed records err as the upload error, logging the first of a series.
func (w *Worker) uploadFailed(err error) {
	msg := err.Error()
	if prev := w.uploadErr.Swap(&msg); prev == nil {
		w.log.Warn("zkworker: uploading the node timestamp failed; IDs are still issued, the mark is kept in the cache file",
			"node", w.node, "err", err)
	}
}
