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
// ends (then it uploads a mark that is not in the node yet) or the lease is lost; the lease's
// renewals (contacts) are lease.Session's. No session for a full session timeout loses the
// lease: the session has expired by then, or ZooKeeper lost it (a new ensemble refuses a
// client that has seen a later zxid for good); leaf-server claims again on a new connection.
func (w *Worker) heartbeat(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.policy().Renew)
	defer t.Stop()
	lastSession := time.Now()
	nextUpload := time.Now().Add(w.opts.HeartbeatInterval)
	for {
		kicked := false
		select {
		case <-ctx.Done():
			if w.mark.Load() > w.uploaded.Load() && w.conn.Load().State() == zk.StateHasSession {
				w.upload()
			}
			return
		case <-t.C:
		case <-w.kick:
			kicked = true
		}
		if w.conflicted.Load() != nil {
			return
		}
		// Without a session a request would wait for one: up to 40 s when a connection
		// sent while ZooKeeper was starting is never answered (go-zookeeper waits 10 read
		// timeouts for the connect response).
		conn := w.conn.Load()
		if conn.State() != zk.StateHasSession {
			w.uploadFailed(zk.ErrNoServer)
			if since := time.Since(lastSession); since > w.opts.SessionTimeout {
				_ = w.lose(fmt.Sprintf("no ZooKeeper session for %v (session timeout %v): the session has expired or ZooKeeper lost it",
					since.Round(time.Millisecond), w.opts.SessionTimeout))
				return
			}
			continue
		}
		lastSession = time.Now()
		if !w.vetted.Load() && !w.vet(conn) {
			continue
		}
		if kicked || !time.Now().Before(nextUpload) {
			w.upload()
			nextUpload = time.Now().Add(w.opts.HeartbeatInterval)
		}
	}
}

// upload writes max(mark, now, last upload) to the node; it never lowers the timestamp (Leaf
// skips an upload when the clock is behind the last one). The write is conditional on the
// node's version (setNode): another writer, or the node gone, loses the lease, after which
// nothing is uploaded any more. The live node's clock is refreshed with it (peer clock check).
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
	if !ok { // lost
		return
	}
	w.uploaded.Store(ts)
	w.lastUpload.Store(w.opts.Clock.Now().UnixMilli())
	if _, err := w.refreshLive(conn); err != nil {
		w.uploadFailed(fmt.Errorf("write live node %s: %w", w.liveNode(), err))
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
		w.log.Warn("zkworker: uploading the node timestamp failed; the mark is kept in the cache file",
			"node", w.node, "err", err)
	}
}

// vet ends the hold of a claim that may have followed a live holder: once the lease's hold is
// over (lease.Stats.HeldUntil zero), the /forever node must not have been written by anyone
// else meanwhile (checkNotRewritten), or the lease is lost. It reports whether the claim may
// serve.
func (w *Worker) vet(conn *zk.Conn) bool {
	s := w.sess.Load()
	if s == nil {
		return false
	}
	_ = s.Ready() // ends the hold when its time has passed
	if !s.Stats().HeldUntil.IsZero() {
		return false
	}
	if err := w.checkNotRewritten(conn, s.Policy().NoHistoryWait(), w.holdWhy); err != nil {
		if errors.Is(err, ErrWorkerIDHeld) {
			_ = w.lose(err.Error())
		}
		return false
	}
	w.vetted.Store(true)
	w.log.Info("zkworker: the previous holder has been waited out; serving", "worker_id", w.id, "node", w.node)
	return true
}
