package zkworker

import "time"

// The rest of snowflake.Source: what the status page, /readyz and /metrics read.

// Name returns "zookeeper" (SourceZooKeeper), also when the worker ID came from the cache
// file; Status().Source tells which.
func (w *Worker) Name() string { return SourceZooKeeper }

// Expiry returns a far-future instant (year 9999) while the claim holds, and the moment of the
// conflict once it was found broken (see ErrConflict): the generator then refuses every ID at
// once. The node is persistent, as in Leaf, and IDs are issued through a ZooKeeper outage; only a
// conflict found on the next session ends them.
func (w *Worker) Expiry() time.Time {
	if c := w.conflicted.Load(); c != nil {
		return c.at
	}
	return noLease
}

// Ready returns nil while the claim holds, also through a ZooKeeper outage (the cache file keeps
// the high-water mark, as in Leaf), and an error wrapping ErrConflict with the reason once the
// claim was found broken.
func (w *Worker) Ready() error {
	if c := w.conflicted.Load(); c != nil {
		return c.err
	}
	return nil
}

// LastHeartbeat returns when the node's timestamp was last uploaded (Status().LastUpload);
// the zero time before the first upload and when the worker ID came from the cache file.
func (w *Worker) LastHeartbeat() time.Time { return w.Status().LastUpload }

// Details returns Status() as the sourceState object of GET /api/v1/snowflake/status shows it:
// workerId, source, address, node, cachePath, session (the session state), mark, uploaded,
// lastUpload (RFC 3339 in UTC, "" for none), uploadError, liveNode (the ephemeral node that
// marks this process as the live holder; "" from the cache) and conflict (Ready's error; ""
// while the claim holds).
func (w *Worker) Details() any {
	s := w.Status()
	conflict := ""
	if err := w.Ready(); err != nil {
		conflict = err.Error()
	}
	live := ""
	if s.Node != "" {
		live = w.liveNode()
	}
	return map[string]any{
		"workerId": s.WorkerID, "source": s.Source, "address": s.Address, "node": s.Node,
		"cachePath": s.CachePath, "session": s.State, "mark": rfc3339(s.Mark),
		"uploaded": rfc3339(s.Uploaded), "lastUpload": rfc3339(s.LastUpload), "uploadError": s.UploadError,
		"liveNode": live, "conflict": conflict,
	}
}

// rfc3339 formats t for the status page; the zero time is "".
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
