package zkworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/snowflake/lease"
)

// The session is the lease (issue 20 item 2), kept by a lease.Session. ZooKeeper expires a
// session, and deletes its ephemeral live node, no sooner than the session timeout after it
// last heard from the client; only then can a replacement create the live node of the worker
// ID. So the renewal is a contact: a request asking whether the live node is still owned by the
// holder's session, answered on that session. The holder stops issuing once the session
// timeout − Margin has passed since the last confirmed contact was sent (lease.Session's
// deadline, on the monotonic, wall and boot clocks: a paused or suspended host counts the time
// it did not run), and issues again only when a contact on the same session succeeds: the
// session survived, nobody can have taken the worker ID (Curator's rule: SUSPENDED means stop
// acting as owner). A new session, a live node gone or owned by another session, or no
// session at all for a full session timeout loses the lease for good (lease.ErrLeaseLost);
// leaf-server then claims again. A claim that may follow a live holder waits out a full
// session timeout + Margin (lease.Config.NoHistory) before it serves (Claim).

// ErrUnreachable is returned by Claim when no ZooKeeper session can be had within
// Options.ConnectTimeout and Options.CacheStart is off: no worker ID is claimed (fail closed).
var ErrUnreachable = errors.New("zkworker: ZooKeeper unreachable; no worker ID claimed")

// sessionTimeouts returns the shorter and the longer of the requested and the negotiated
// session timeout (the requested one while the negotiated one is unknown).
func (w *Worker) sessionTimeouts() (short, long time.Duration) {
	short, long = w.opts.SessionTimeout, w.opts.SessionTimeout
	if n := time.Duration(w.negotiatedMs.Load()) * time.Millisecond; n > 0 {
		short, long = min(short, n), max(long, n)
	}
	return short, long
}

// policy is the lease's timing: TTL the longer session timeout (so that a claim without
// history waits the longest a previous holder could issue: TTL + Margin), renewals every
// quarter of the time a contact backs IDs (1 s with the defaults: three may fail or be late
// before the lease lapses), at most HeartbeatInterval. Each contact grants the shorter
// session timeout (renew).
func (w *Worker) policy() lease.Policy {
	short, long := w.sessionTimeouts()
	every := max(min((short-w.opts.Margin)/4, w.opts.HeartbeatInterval), 10*time.Millisecond)
	return lease.Policy{TTL: long, Renew: every, Margin: w.opts.Margin}
}

// renew is the lease's renewal: one contact on the connection of the claim. It returns the
// shorter session timeout on success, an error wrapping lease.ErrLeaseLost (and ErrConflict)
// when the session or the live node is gone, and any other error for a contact that failed
// (the deadline runs on). go-zookeeper takes no context: a request on a dead connection
// returns when the connection is dropped (two thirds of the session timeout).
func (w *Worker) renew(context.Context) (time.Duration, error) {
	conn := w.conn.Load()
	if conn == nil {
		return 0, zk.ErrNoServer
	}
	sess := w.liveSession.Load()
	switch {
	case conn.SessionID() != sess && conn.State() == zk.StateHasSession:
		return 0, w.lose(fmt.Sprintf("ZooKeeper session 0x%x ended (the connection now has session 0x%x); another server may hold the worker ID", sess, conn.SessionID()))
	case conn.State() != zk.StateHasSession:
		return 0, fmt.Errorf("no ZooKeeper session (%s): %w", conn.State(), zk.ErrNoServer)
	}
	ok, stat, err := conn.Exists(w.liveNode())
	switch {
	case err != nil:
		return 0, fmt.Errorf("read live node %s: %w", w.liveNode(), err)
	case conn.SessionID() != sess:
		return 0, errors.New("answered on another ZooKeeper session") // the next contact loses the lease
	case !ok:
		return 0, w.lose(fmt.Sprintf("the live node %s was deleted while this process's session lasted", w.liveNode()))
	case stat.EphemeralOwner != sess:
		return 0, w.lose(fmt.Sprintf("the live node %s belongs to another ZooKeeper session (0x%x)", w.liveNode(), stat.EphemeralOwner))
	}
	short, _ := w.sessionTimeouts()
	return short, nil
}

// startLease starts the lease of a claim whose live node this worker's session created:
// sent is the instant read before the first contact was sent. noHistory holds the claim back
// for a full session timeout + Margin (lease.Config.NoHistory).
func (w *Worker) startLease(ctx context.Context, sent lease.Instant, noHistory bool) (*lease.Session, error) {
	granted, err := w.renew(ctx)
	if err != nil {
		return nil, fmt.Errorf("confirm the live node %s: %w", w.liveNode(), err)
	}
	s, err := lease.Start(lease.Config{Policy: w.policy(), Clock: w.clock, Renew: w.renew, NoHistory: noHistory, Logger: w.log}, sent, granted)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	w.sess.Store(s)
	return s, nil
}
