package snowflake

import (
	"context"
	"time"
)

// Source is a worker-ID source: where a generator's worker ID comes from and what keeps it
// unique. It hands the generator the worker ID, keeps the time high-water mark (HighWater)
// and says until when it may back IDs (Lease); leaf-server's HTTP layer reads its name,
// readiness, heartbeat and details for /api/v1/snowflake/status, /readyz and /metrics.
//
// Implementations: [StaticSource] (a configured worker ID, the mark in a local file; no
// lease), zkworker.Worker (Leaf's ZooKeeper node, the mark in the node and Leaf's cache file;
// the ZooKeeper session is its lease), sqllease.Lease (a lease row in the segment database,
// the mark in the row) and etcdworker.Worker (a key under an etcd lease, the mark in a key of
// its own); the three lease sources share their policy through package snowflake/lease. Give one to [New]
// through [Settings].Source. A source is claimed before New and closed after the last Next.
//
// Every method is safe for concurrent use. Name, WorkerID, Expiry, Ready, LastHeartbeat and
// Details do no I/O and do not block: the generator calls Expiry on every ID, and the probes
// call the others on every request.
type Source interface {
	// HighWater persists the generator's time high-water mark: Load is called once by New,
	// Store about once per Settings.HighWaterWindow while IDs are issued.
	HighWater
	// Lease's Expiry is the instant from which the source may no longer back IDs (the end of
	// a lease's validity, in the generator's clock); the zero time means never. A source
	// either has a lease or not: when Expiry returns the zero time at New, New does not ask
	// again. A source that has lost its claim returns an instant in the past, never the zero
	// time.
	Lease
	// Name is the source's kind, as leaf-server's --worker-id-source names it: "static",
	// "zookeeper", "sql" or "etcd". It labels the worker ID on /metrics and the status page.
	Name() string
	// WorkerID is the claimed worker ID, in 0..MaxWorker() of the layout it was claimed for
	// (New checks it against Settings.Layout). It never changes during the source's life.
	WorkerID() int64
	// Ready returns nil while the source can back new IDs, and otherwise an error whose text
	// says why, for an operator (/readyz shows it, through Generator.Ready): a lost or lapsed
	// lease, an identity conflict (zkworker.ErrConflict).
	Ready() error
	// LastHeartbeat is when the source last renewed its claim (a lease renewal, a ZooKeeper
	// upload); the zero time when none yet or when the source has no heartbeat.
	LastHeartbeat() time.Time
	// Details is the source's own state for the status page (the sourceState object of GET
	// /api/v1/snowflake/status): a value that encoding/json encodes, or nil when there is
	// none.
	Details() any
	// Close stops the source's goroutines and releases the worker ID where the source can (a
	// lease row is freed and an etcd lease revoked at once; a ZooKeeper /forever node is
	// persistent and stays, as in Leaf, while its ephemeral live node goes with the
	// session). ctx bounds the release. It returns the release's error; later calls return the first
	// call's result. The generator must not be used afterwards.
	Close(ctx context.Context) error
}

// StaticSource is the "static" worker-ID source: a worker ID given by configuration (a flag,
// a StatefulSet ordinal), with the time high-water mark in a [FileHighWater]. It is only as
// unique as the deployment that hands out the IDs: two live generators with one worker ID
// issue duplicate IDs, and nothing here can notice (see [Settings].WorkerID). It never
// expires and is always ready; Close does nothing. Safe for concurrent use.
type StaticSource struct {
	workerID int64
	hw       *FileHighWater
}

var _ Source = (*StaticSource)(nil)

// NewStaticSource returns the static source for workerID with its high-water mark in the
// file highWaterPath (see [NewFileHighWater]; leaf-server uses
// <data-dir>/snowflake-<workerID>.highwater). Nothing is read or written until Load or Store;
// the worker ID is checked by New against the layout.
func NewStaticSource(workerID int64, highWaterPath string) *StaticSource {
	return &StaticSource{workerID: workerID, hw: NewFileHighWater(highWaterPath)}
}

// Path returns the high-water file's path.
func (s *StaticSource) Path() string { return s.hw.Path() }

// Load reads the high-water mark from the file: [FileHighWater.Load].
func (s *StaticSource) Load(ctx context.Context) (time.Time, error) { return s.hw.Load(ctx) }

// Store writes the high-water mark to the file: [FileHighWater.Store].
func (s *StaticSource) Store(ctx context.Context, mark time.Time) error { return s.hw.Store(ctx, mark) }

// Name returns "static".
func (s *StaticSource) Name() string { return "static" }

// WorkerID returns the configured worker ID.
func (s *StaticSource) WorkerID() int64 { return s.workerID }

// Expiry returns the zero time: a static worker ID never expires.
func (s *StaticSource) Expiry() time.Time { return time.Time{} }

// Ready returns nil: a static worker ID cannot be lost.
func (s *StaticSource) Ready() error { return nil }

// LastHeartbeat returns the zero time: a static source has no heartbeat.
func (s *StaticSource) LastHeartbeat() time.Time { return time.Time{} }

// Details returns nil: the status page shows nothing beyond the worker ID and the mark.
func (s *StaticSource) Details() any { return nil }

// Close returns nil: there is nothing to release.
func (s *StaticSource) Close(context.Context) error { return nil }
