package zkworker

import (
	"fmt"
	"time"

	"github.com/leaf-go/leaf/snowflake/lease"
)

// The rest of snowflake.Source: what the status page, /readyz and /metrics read.

// Name returns "zookeeper" (SourceZooKeeper), also when the worker ID came from the cache
// file; Status().Source tells which.
func (w *Worker) Name() string { return SourceZooKeeper }

// Expiry returns the end of the lease (the session is the lease; lease.Session.Expiry): the
// session timeout − Margin after the last confirmed contact was sent, on Clock, ended earlier
// when the wall or boot clock says the host was suspended or paused meanwhile; long past while
// a claim that may follow a live holder is held back, and once the lease is lost. A worker
// started from the cache file (Options.CacheStart) that has not reached ZooKeeper yet returns
// a far-future instant (year 9999): it issues on the cache file's word alone, the risk that
// option takes. A held-back claim returns long past until the heartbeat has vetted it.
func (w *Worker) Expiry() time.Time {
	if c := w.conflicted.Load(); c != nil {
		return lease.Expired
	}
	s := w.sess.Load()
	if s == nil {
		return noLease
	}
	if !w.vetted.Load() {
		return lease.Expired
	}
	return s.Expiry()
}

// Ready returns nil while the lease backs IDs; an error wrapping ErrConflict and
// lease.ErrLeaseLost with the reason once it is lost (for good: leaf-server claims again); and
// otherwise the lease's reason (held back after the claim, or no word from ZooKeeper: it backs
// IDs again after a contact on the same session).
func (w *Worker) Ready() error {
	if c := w.conflicted.Load(); c != nil {
		return c.err
	}
	s := w.sess.Load()
	if s == nil {
		return nil
	}
	if err := s.Ready(); err != nil {
		return fmt.Errorf("zkworker: lease on worker ID %d (ZooKeeper session 0x%x, timeout %v − margin %v): %w",
			w.id, w.liveSession.Load(), w.opts.SessionTimeout, w.opts.Margin, err)
	}
	if !w.vetted.Load() {
		return fmt.Errorf("zkworker: lease on worker ID %d held back (%s): checking that no other process writes %s before serving",
			w.id, w.holdWhy, w.node)
	}
	return nil
}

// LastHeartbeat returns when the node's timestamp was last uploaded (Status().LastUpload);
// the zero time before the first upload and when the worker ID came from the cache file.
func (w *Worker) LastHeartbeat() time.Time { return w.Status().LastUpload }

// Details returns Status() as the sourceState object of GET /api/v1/snowflake/status shows it:
// workerId, source, address, node, cachePath, session (the session state), mark, uploaded,
// lastUpload (RFC 3339 in UTC, "" for none), uploadError, liveNode (the ephemeral node that
// marks this process as the live holder; "" before it exists), lastContact (when the last
// confirmed contact was sent), expires (Expiry; "" before the first contact),
// sessionTimeoutMs and marginMs, and conflict (Ready's error; "" while the lease backs IDs).
func (w *Worker) Details() any {
	s := w.Status()
	conflict := ""
	if err := w.Ready(); err != nil {
		conflict = err.Error()
	}
	live, lastContact, expires := "", "", ""
	if w.liveSession.Load() != 0 {
		live = w.liveNode()
	}
	if s := w.sess.Load(); s != nil {
		st := s.Stats()
		lastContact, expires = rfc3339(st.LastRenewal), rfc3339(st.Expires)
	}
	return map[string]any{
		"workerId": s.WorkerID, "source": s.Source, "address": s.Address, "node": s.Node,
		"cachePath": s.CachePath, "session": s.State, "mark": rfc3339(s.Mark),
		"uploaded": rfc3339(s.Uploaded), "lastUpload": rfc3339(s.LastUpload), "uploadError": s.UploadError,
		"liveNode": live, "conflict": conflict, "lastContact": lastContact, "expires": expires,
		"sessionTimeoutMs": w.opts.SessionTimeout.Milliseconds(), "marginMs": w.opts.Margin.Milliseconds(),
	}
}

// rfc3339 formats t for the status page; the zero time is "".
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
