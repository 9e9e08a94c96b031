package zkworker

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/snowflake"
)

// The session is the lease (issue 20 item 2). ZooKeeper expires a session, and deletes its
// ephemeral live node, no sooner than the session timeout after it last heard from the client;
// only then can a replacement create the live node of the worker ID. So a holder stops issuing
// once the session timeout − Margin has passed since it sent the last request that ZooKeeper
// answered with the live node still owned by the holder's session (a contact), on the local
// monotonic and boot clocks (snowflake.LeaseDeadline: a suspended or paused host counts the
// time it did not run). It issues again only when a contact succeeds on the same session: the
// session survived, nobody can have taken the worker ID (Curator's rule: SUSPENDED means stop
// acting as owner). A new session, a live node gone or owned by another session, or no session
// at all for a full session timeout, loses the lease for good (Lost); leaf-server then claims
// again. A replacement waits out a full session timeout + Margin before it serves whenever a
// previous holder may still have been issuing (Claim).

// ErrUnreachable is returned by Claim when no ZooKeeper session can be had within
// Options.ConnectTimeout and Options.CacheStart is off: no worker ID is claimed (fail closed).
var ErrUnreachable = errors.New("zkworker: ZooKeeper unreachable; no worker ID claimed")

// holdFor is how long after a contact was sent the lease backs IDs: the shorter of the
// requested and the negotiated session timeout, minus Margin.
func (w *Worker) holdFor() time.Duration {
	st := w.opts.SessionTimeout
	if n := time.Duration(w.negotiatedMs.Load()) * time.Millisecond; n > 0 && n < st {
		st = n
	}
	return st - w.opts.Margin
}

// takeoverWait is how long a claim that may follow a live holder waits before it serves: the
// longer of the requested and the negotiated session timeout, plus Margin. A holder stops
// within the session timeout − Margin of its last contact, and every contact after our live
// node exists tells it the worker ID is gone.
func (w *Worker) takeoverWait() time.Duration {
	st := w.opts.SessionTimeout
	if n := time.Duration(w.negotiatedMs.Load()) * time.Millisecond; n > st {
		st = n
	}
	return st + w.opts.Margin
}

// contact asks ZooKeeper whether the live node is still owned by this worker's session, on
// the same session. Confirmed, the lease is renewed from the moment the request was sent; the
// node gone or another session's, or a new session, loses the lease; a failed request changes
// nothing (the deadline runs on). It reports whether the lease was renewed.
func (w *Worker) contact(conn *zk.Conn) bool {
	sess := w.liveSession.Load()
	sentWall, sentBoot := w.opts.Clock.Now(), w.boot.Boot()
	if conn.SessionID() != sess && conn.State() == zk.StateHasSession {
		w.lose(fmt.Sprintf("ZooKeeper session 0x%x ended (the connection now has session 0x%x); another server may hold the worker ID", sess, conn.SessionID()))
		return false
	}
	ok, stat, err := conn.Exists(w.liveNode())
	switch {
	case err != nil:
		w.contactErr.Store(new(err.Error()))
		return false
	case conn.SessionID() != sess:
		return false // answered on another session: says nothing about ours (the next contact loses it)
	case !ok:
		w.lose(fmt.Sprintf("the live node %s was deleted while this process's session lasted", w.liveNode()))
		return false
	case stat.EphemeralOwner != sess:
		w.lose(fmt.Sprintf("the live node %s belongs to another ZooKeeper session (0x%x)", w.liveNode(), stat.EphemeralOwner))
		return false
	}
	w.renew(sentWall, sentBoot)
	w.contactErr.Store(nil)
	return true
}

// renew moves the lease's end to the contact sent at sentWall/sentBoot, never backwards.
func (w *Worker) renew(sentWall time.Time, sentBoot time.Duration) {
	d := snowflake.NewLeaseDeadline(sentWall, sentBoot, w.holdFor())
	w.dlMu.Lock()
	defer w.dlMu.Unlock()
	if cur := w.dl.Load(); cur != nil && cur.Remaining(sentWall, sentBoot) > d.Remaining(sentWall, sentBoot) {
		return
	}
	w.dl.Store(&d)
	w.lastContact.Store(sentWall.UnixMilli())
}

// lapsed returns how long ago the last contact was sent when the lease no longer backs IDs
// (it did not hear from ZooKeeper in time), and 0 while it does.
func (w *Worker) lapsed() time.Duration {
	d := w.dl.Load()
	if d == nil {
		return 0
	}
	now := w.opts.Clock.Now()
	if d.Remaining(now, w.boot.Boot()) > 0 {
		return 0
	}
	return max(now.Sub(msTime(w.lastContact.Load())), time.Millisecond)
}

// leaseErr is Ready's answer while the lease has lapsed but is not lost.
func (w *Worker) leaseErr(ago time.Duration) error {
	msg := fmt.Sprintf("zkworker: lease on worker ID %d lapsed: no word from ZooKeeper for %v (session timeout %v − margin %v); "+
		"its session may have expired and another server may hold the worker ID, so no snowflake IDs until ZooKeeper "+
		"confirms the same session", w.id, ago.Round(time.Millisecond), w.opts.SessionTimeout, w.opts.Margin)
	if p := w.contactErr.Load(); p != nil {
		msg += " (last error: " + *p + ")"
	}
	return errors.New(msg)
}
