package zkworker

import "time"

// The rest of snowflake.Source: what the status page, /readyz and /metrics read.

// Name returns "zookeeper" (SourceZooKeeper), also when the worker ID came from the cache
// file; Status().Source tells which.
func (w *Worker) Name() string { return SourceZooKeeper }

// Expiry returns the zero time: the worker ID has no lease. The node is persistent, as in
// Leaf, and IDs are issued through a ZooKeeper outage.
func (w *Worker) Expiry() time.Time { return time.Time{} }

// Ready returns nil: a ZooKeeper outage does not stop the generator (the cache file keeps the
// high-water mark), as in Leaf.
func (w *Worker) Ready() error { return nil }

// LastHeartbeat returns when the node's timestamp was last uploaded (Status().LastUpload);
// the zero time before the first upload and when the worker ID came from the cache file.
func (w *Worker) LastHeartbeat() time.Time { return w.Status().LastUpload }

// Details returns Status() as the sourceState object of GET /api/v1/snowflake/status shows it:
// workerId, source, address, node, cachePath, session (the session state), mark, uploaded,
// lastUpload (RFC 3339 in UTC, "" for none) and uploadError.
func (w *Worker) Details() any {
	s := w.Status()
	return map[string]any{
		"workerId": s.WorkerID, "source": s.Source, "address": s.Address, "node": s.Node,
		"cachePath": s.CachePath, "session": s.State, "mark": rfc3339(s.Mark),
		"uploaded": rfc3339(s.Uploaded), "lastUpload": rfc3339(s.LastUpload), "uploadError": s.UploadError,
	}
}

// rfc3339 formats t for the status page; the zero time is "".
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
