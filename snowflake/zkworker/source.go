package zkworker

import "time"

// The rest of snowflake.Source: what the status page, /readyz and /metrics read.

// Name returns "zookeeper" (SourceZooKeeper), also when the worker ID came from the cache
// file; Status().Source tells which.
func (w *Worker) Name() string { return SourceZooKeeper }

// Expiry returns the end of the lease (the session is the lease): the session timeout −
// Margin after the last confirmed contact was sent, on Clock, shortened when the boot clock
// says the host was suspended or paused meanwhile (snowflake.LeaseDeadline). Once the lease is
// lost it returns the moment of the loss. A worker started from the cache file
// (Options.CacheStart) that has not reached ZooKeeper yet returns a far-future instant (year
// 9999): it issues on the cache file's word alone, the risk that option takes.
func (w *Worker) Expiry() time.Time {
	if c := w.conflicted.Load(); c != nil {
		return c.at
	}
	d := w.dl.Load()
	if d == nil {
		return noLease
	}
	return d.Expiry(w.opts.Clock.Now(), w.boot.Boot())
}

// Ready returns nil while the lease backs IDs; an error wrapping ErrConflict with the reason
// once it is lost (for good: leaf-server claims again), and an error saying how long ZooKeeper
// has not been heard from while it has lapsed (it backs IDs again after a contact on the same
// session).
func (w *Worker) Ready() error {
	if c := w.conflicted.Load(); c != nil {
		return c.err
	}
	if ago := w.lapsed(); ago > 0 {
		return w.leaseErr(ago)
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
	live, expires := "", ""
	if w.liveSession.Load() != 0 {
		live = w.liveNode()
	}
	if w.dl.Load() != nil {
		expires = rfc3339(w.Expiry())
	}
	return map[string]any{
		"workerId": s.WorkerID, "source": s.Source, "address": s.Address, "node": s.Node,
		"cachePath": s.CachePath, "session": s.State, "mark": rfc3339(s.Mark),
		"uploaded": rfc3339(s.Uploaded), "lastUpload": rfc3339(s.LastUpload), "uploadError": s.UploadError,
		"liveNode": live, "conflict": conflict, "lastContact": rfc3339(msTime(w.lastContact.Load())), "expires": expires,
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
