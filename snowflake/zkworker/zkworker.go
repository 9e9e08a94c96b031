// Package zkworker claims a snowflake worker ID in ZooKeeper exactly the way Meituan Leaf's
// SnowflakeZookeeperHolder does, so that Java Leaf nodes and leaf-go nodes can share one
// namespace, and it keeps the generator's time high-water mark in the claimed node. Its
// Worker is the "zookeeper" snowflake.Source.
//
// # ZooKeeper layout (Leaf's)
//
//	/snowflake/<leaf.name>/forever/<ip>:<port>-<10-digit sequence>    persistent sequential
//	data: {"ip":"10.0.0.7","port":"8080","timestamp":1700000000000}  (port is a string)
//
// The node's sequence number is the worker ID. A node whose <ip>:<port> matches ours is reused
// with its number; otherwise a new sequential node is created. Numbers are never reused (the
// parent's counter only grows), so a namespace through which more than 1024 addresses have passed
// runs out: Claim refuses with ErrWorkerIDExhausted and says what to do. Every 3 s a goroutine
// owned by the Worker uploads the node's timestamp again (Leaf's ScheduledUploadData).
//
// After a successful claim the worker ID is cached in
// <tmpdir>/<leaf.name>/leafconf/<port>/workerID.properties (Leaf's file, `workerID=<n>`). When
// ZooKeeper cannot be reached at start, Claim falls back to that file, as Leaf does.
//
// # Differences from Leaf (bug fixes)
//
//   - The number is parsed from the last `-` of the node name, so a leaf.name (or port label)
//     containing `-` works; Leaf splits the full path at the first `-` and fails.
//   - The first node of a namespace gets its own number too (Leaf assumes 0).
//   - A reused node (or cache file) whose timestamp is ahead of our clock is waited out for up to
//     Options.StartWait and is otherwise a fatal error (ErrClockBehind); Leaf logs it, falls back
//     to the cache file and starts anyway.
//   - The timestamp is a high-water mark: Worker is a snowflake.HighWater. The node and
//     the cache file (extra line `timestamp=<ms>`, ignored by Leaf) hold the highest millisecond
//     the generator may have reached, which lies up to snowflake.DefaultHighWaterWindow ahead of
//     the clock; a restart waits until its clock has passed it. (A Java Leaf node restarting on
//     the same ip:port within that window refuses its ZooKeeper claim, as it should.)
//   - Only connection failures fall back to the cache file; every other error stops the start.
//   - Exclusive holders: beside /forever, a live holder keeps the ephemeral node
//     /snowflake/<leaf.name>/live/<workerID> (JSON: address, host, pid, since, node; see
//     Holder) for its session. A second process resolving to the same worker ID (the same
//     ip:port: two Docker hosts on one bridge address, a force-deleted pod and its replacement)
//     waits up to the session timeout + 2 s in case the holder crashed, then refuses to start
//     with ErrWorkerIDHeld naming the holder. Leaf lets both issue duplicate IDs. A reused node
//     that was written within the last three heartbeat intervals, by a process without a live
//     node and not by this address's last run (its cache file holds that run's last
//     timestamp), is watched for one interval + 500 ms: written again, a live Java Leaf node
//     holds the identity, and Claim refuses with ErrWorkerIDHeld.
//   - Conflicts at runtime stop the worker for good (ErrConflict; Expiry in the past, so the
//     generator refuses every ID; Ready says why): the /forever node gone (ZooKeeper lost its
//     data, or it was deleted: another server may have drawn the number since), the live node
//     deleted or owned by another session, or a timestamp in the /forever node that this
//     process did not write (uploads are conditional on the node's version: a live Java Leaf
//     node on the same ip:port). They are found at the next upload, within one
//     HeartbeatInterval once a session exists. Leaf (and leaf-go before) created the node
//     again and kept issuing.
//   - A starting server whose address has no node takes back the worker ID of its cache file
//     when no other node holds it, and a sequential number that another address's node holds
//     is never taken; Leaf re-uses such numbers after a loss. A brand-new server that starts
//     after ZooKeeper lost its data but before a running one has reconnected can still draw
//     that one's number; the running one stops at its first upload on the new session (a new
//     connection is opened after one session timeout without a session, since a new ensemble
//     refuses a client that has seen a later zxid). IDs issued by both in between can repeat:
//     after losing ZooKeeper's data, start new servers only once the running ones have
//     reconnected (their /readyz then says whether they stopped).
//   - The advertised IP is normalised (NormaliseIP): "[::1]" and "::1" are one identity; a
//     host name is kept as given, with a warning.
package zkworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
)

var (
	// ErrOptions is returned by Claim for missing or malformed Options.
	ErrOptions = errors.New("zkworker: invalid options")
	// ErrWorkerIDExhausted is returned by Claim when the node's sequence number is larger than
	// the layout's largest worker ID (1023 by default).
	ErrWorkerIDExhausted = errors.New("zkworker: no worker ID left in the namespace")
	// ErrClockBehind is returned by Claim when the clock is behind the timestamp stored in the
	// reused node or the cache file by more than Options.StartWait (or still behind after
	// waiting): an earlier run of this address may have issued IDs up to that time.
	ErrClockBehind = errors.New("zkworker: clock behind the stored timestamp")
	// ErrNoCache is returned by Claim when ZooKeeper is unreachable and no cache file exists.
	ErrNoCache = errors.New("zkworker: ZooKeeper unreachable and no cached worker ID")
	// ErrNodeData is returned by Claim when a reused node's data is not Leaf's JSON, or the cache
	// file is not a valid properties file with a workerID.
	ErrNodeData = errors.New("zkworker: malformed stored data")
)

// Source names where a Worker's ID came from.
const (
	SourceZooKeeper = "zookeeper"
	SourceCache     = "cache"
)

// Worker is a claimed worker ID, the "zookeeper" snowflake.Source: pass it as
// snowflake.Settings.Source. It is the generator's snowflake.HighWater: the mark is
// kept in the ZooKeeper node's timestamp and in the cache file. Close stops the upload goroutine
// and the ZooKeeper session (the persistent node stays, as in Leaf). Safe for concurrent use.
type Worker struct {
	opts      Options
	id        int64
	source    string
	addr      string // ip:port
	node      string // full node path; "" when from the cache
	cachePath string
	loaded    time.Time // the mark found at claim time
	since     time.Time // when the live node was first written (holderData; set once, in Claim)
	log       *slog.Logger

	// conn is the ZooKeeper connection, nil when from the cache. Claim sets it; afterwards only
	// the upload goroutine replaces it (reconnect).
	conn   atomic.Pointer[zk.Conn]
	cancel context.CancelFunc
	done   chan struct{} // closed when the upload goroutine has returned
	kick   chan struct{} // buffer 1: upload now (a new mark was stored)
	lost   chan struct{} // closed by lose
	close  sync.Once

	clock        lease.Clock                   // Options.Clock with the boot clock
	negotiatedMs atomic.Int64                  // the session timeout ZooKeeper granted, ms; 0 until known
	sess         atomic.Pointer[lease.Session] // the lease; nil before the first contact (cache-file start)
	vetted       atomic.Bool                   // a held-back claim passed checkNotRewritten (or was not held back)
	holdWhy      string                        // why the claim was held back; set in Claim

	storeMu sync.Mutex // serialises Store's cache-file writes

	mark       atomic.Int64 // highest stored mark, Unix ms
	uploaded   atomic.Int64 // highest timestamp written to the node, Unix ms
	lastUpload atomic.Int64 // wall time of the last successful upload, Unix ms
	uploadErr  atomic.Pointer[string]

	nodeMu      sync.Mutex                    // serialises writes to the node (setNode)
	liveSession atomic.Int64                  // ZooKeeper session that created the live node
	version     atomic.Int32                  // the node's version after our last write
	written     atomic.Pointer[[]byte]        // the data of our last confirmed write to the node
	attempted   atomic.Pointer[[]byte]        // the data of our last write attempt (maybe applied, answer lost)
	conflicted  atomic.Pointer[conflictState] // set once, by conflict
	final       atomic.Bool                   // StoreFinal ran: no more uploads
}

var _ snowflake.Source = (*Worker)(nil)

// endpoint is the node data, field for field and in order as Leaf's Endpoint serialised by
// Jackson: {"ip":"…","port":"…","timestamp":<ms>}.
type endpoint struct {
	IP        string `json:"ip"`
	Port      string `json:"port"`
	Timestamp int64  `json:"timestamp"`
}

// Claim claims a worker ID for Options.IP:Options.Port under /snowflake/<LeafName>/forever,
// reusing this address's node if it exists. It checks the clock against the stored timestamp
// (waiting up to StartWait), writes the cache file and starts the upload goroutine. When no
// ZooKeeper session can be had within ConnectTimeout (or ctx ends first), it uses the cache
// file instead, with the same clock check. Errors: ErrOptions, ErrWorkerIDExhausted,
// ErrClockBehind, ErrNoCache, ErrNodeData, ZooKeeper and file errors.
func Claim(ctx context.Context, o Options) (*Worker, error) {
	if err := o.normalise(); err != nil {
		return nil, err
	}
	w := &Worker{
		opts:      o,
		addr:      o.IP + ":" + o.Port,
		cachePath: filepath.Join(o.CacheDir, o.LeafName, "leafconf", o.Port, "workerID.properties"),
		log:       o.Logger,
		done:      make(chan struct{}),
		kick:      make(chan struct{}, 1),
		lost:      make(chan struct{}),
		clock:     lease.WithBoot(o.Clock.Now),
	}
	conn, err := w.connect(ctx)
	if err == nil {
		w.conn.Store(conn)
		if err = w.claimNode(ctx, conn); err != nil {
			conn.Close()
			w.conn.Store(nil)
		}
	}
	switch {
	case err == nil:
		var hbCtx context.Context
		hbCtx, w.cancel = context.WithCancel(context.Background())
		go w.heartbeat(hbCtx)
		return w, nil
	case !unreachable(err):
		return nil, err
	case !o.CacheStart:
		return nil, fmt.Errorf("%w: %s: %v. Snowflake IDs wait until ZooKeeper answers and the claim succeeds "+
			"(--zk-cache-start would serve Leaf's cached worker ID without ZooKeeper, at the risk of duplicate IDs)",
			ErrUnreachable, strings.Join(o.Servers, ","), err)
	}
	w.log.Warn("zkworker: ZooKeeper unreachable; serving the cached worker ID (cache-file start) until ZooKeeper answers, "+
		"then registering it: another process may hold it meanwhile", "servers", o.Servers, "err", err, "cache", w.cachePath)
	if cerr := w.fromCache(ctx); cerr != nil {
		return nil, fmt.Errorf("%w (ZooKeeper: %v)", cerr, err)
	}
	var regCtx context.Context
	regCtx, w.cancel = context.WithCancel(context.Background())
	go w.registerCached(regCtx)
	return w, nil
}

// Lost returns a channel that is closed when the lease on the worker ID is lost for good (see
// ErrConflict); leaf-server then claims again.
func (w *Worker) Lost() <-chan struct{} { return w.lost }

// WorkerID returns the claimed worker ID. It implements snowflake.Source.
func (w *Worker) WorkerID() int64 { return w.id }

// Load returns the mark found at claim time: the reused node's timestamp or the cache file's,
// whichever is later (zero for a new node without a cache). Claim has already waited for the
// clock to pass it. It implements snowflake.HighWater.
func (w *Worker) Load(context.Context) (time.Time, error) { return w.loaded, nil }

// Store writes mark to the cache file (durably, before it returns) and asks the upload goroutine
// to write it to the node at once. A ZooKeeper outage does not fail Store (Leaf keeps issuing
// IDs without ZooKeeper too); the cache file is the durable copy. It implements
// snowflake.HighWater.
func (w *Worker) Store(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	w.storeMu.Lock()
	defer w.storeMu.Unlock()
	if ms <= w.mark.Load() {
		return nil
	}
	if err := w.writeCache(ms); err != nil {
		return fmt.Errorf("write cache file: %w", err)
	}
	w.mark.Store(ms)
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return nil
}

// StoreFinal stores the exact mark of a graceful shutdown (snowflake.FinalHighWater), lower
// than the stored one: in the cache file, and in the node when a session is at hand (otherwise
// the node keeps its higher timestamp and the next start waits for it, which is safe).
func (w *Worker) StoreFinal(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	w.storeMu.Lock()
	defer w.storeMu.Unlock()
	w.final.Store(true) // a later upload would write a time past the exact mark
	if err := w.writeCache(ms); err != nil {
		return fmt.Errorf("write cache file: %w", err)
	}
	w.mark.Store(ms)
	conn := w.conn.Load()
	if conn == nil || w.conflicted.Load() != nil || conn.State() != zk.StateHasSession || w.Ready() != nil {
		return nil
	}
	data, _ := json.Marshal(endpoint{IP: w.opts.IP, Port: w.opts.Port, Timestamp: ms})
	ok, err := w.setNode(conn, data)
	if err != nil {
		return fmt.Errorf("upload the final mark to %s: %w", w.node, err)
	}
	if ok {
		w.uploaded.Store(ms)
	}
	return nil
}

var _ snowflake.FinalHighWater = (*Worker)(nil)

// Status is a snapshot of a Worker for status pages.
type Status struct {
	// WorkerID is the claimed worker ID.
	WorkerID int64
	// Source is SourceZooKeeper or SourceCache.
	Source string
	// Address is the registered ip:port.
	Address string
	// Node is the full node path; empty when the ID came from the cache.
	Node string
	// CachePath is the cache file's path.
	CachePath string
	// State is the ZooKeeper session state (e.g. "StateHasSession"); empty without a session.
	State string
	// Mark is the highest stored high-water mark; Uploaded the highest timestamp in the node.
	Mark, Uploaded time.Time
	// LastUpload is when the node was last written; zero if never since the claim.
	LastUpload time.Time
	// UploadError is the last upload's error, empty when it succeeded.
	UploadError string
}

// Status returns a snapshot of the worker's state.
func (w *Worker) Status() Status {
	s := Status{
		WorkerID:  w.id,
		Source:    w.source,
		Address:   w.addr,
		Node:      w.node,
		CachePath: w.cachePath,
		Mark:      msTime(w.mark.Load()),
		Uploaded:  msTime(w.uploaded.Load()),
	}
	if conn := w.conn.Load(); conn != nil {
		s.State = conn.State().String()
		s.LastUpload = msTime(w.lastUpload.Load())
	}
	if p := w.uploadErr.Load(); p != nil {
		s.UploadError = *p
	}
	return s
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Close stops the upload goroutine (which first uploads a mark the node does not have yet),
// closes the ZooKeeper session and waits for the goroutine. An upload hung on a broken connection
// is cut off after the session timeout, or when ctx ends if that comes first. The node stays (it
// is persistent, as in Leaf; the ephemeral live node goes with the session), so there is nothing
// to release and Close returns nil. Safe to call more than once. It implements
// snowflake.Source.
func (w *Worker) Close(ctx context.Context) error {
	w.close.Do(func() {
		if s := w.sess.Load(); s != nil {
			s.Stop()
		}
		if w.cancel != nil {
			w.cancel()
		}
		select {
		case <-w.done:
		case <-time.After(w.opts.SessionTimeout):
		case <-ctx.Done():
		}
		if conn := w.conn.Load(); conn != nil {
			conn.Close()
		}
		<-w.done
		if conn := w.conn.Load(); conn != nil {
			conn.Close() // registerCached may have stored it meanwhile
		}
	})
	return nil
}
