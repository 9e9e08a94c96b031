package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/k8sworker"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/store"
)

// rangeScanInterval is how often a lease source's range is rescanned for
// /metrics (leaf_snowflake_worker_ids_free, leaf_snowflake_peer_clock_offset_seconds):
// one small read of the coordinator, a quarter of Prometheus's usual alert
// "for" of one minute.
const rangeScanInterval = 15 * time.Second

// liveHolders lists the worker IDs that have a live holder in the
// coordinator (this server's among them) and the other holders' clock reports.
type liveHolders func(ctx context.Context, self int64) (held []int64, peers []snowflake.Peer, err error)

// rangeWatch keeps the last scan of a lease source's worker ID range for
// api.Deps.WorkerRange. Its goroutine runs until stop (or the end of the
// context given to watchWorkerRange).
type rangeWatch struct {
	lo, hi int64
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex // guards last, scanned
	last    api.WorkerRange
	scanned bool
}

// watchWorkerRange starts scanning the range of cfg's lease source src
// every rangeScanInterval, the first scan at once. It returns nil for a
// source without a range (static, zookeeper: Leaf's layout numbers its
// nodes instead) or without a way to list holders yet (etcd).
func watchWorkerRange(ctx context.Context, cfg Config, st store.Store, src snowflake.Source, log *slog.Logger) *rangeWatch {
	var list liveHolders
	switch cfg.WorkerIDSource {
	case "sql":
		ls, ok := st.(sqllease.Store)
		if !ok {
			return nil
		}
		list = sqlLiveHolders(ls)
	case "kubernetes":
		if s, ok := src.(sealingSource); ok {
			src = s.Source
		}
		if w, ok := src.(*k8sworker.Worker); ok {
			// Holders' clocks are not compared: a Lease's renewTime is the holder's clock at
			// a moment this server cannot place on its own.
			list = func(ctx context.Context, _ int64) ([]int64, []snowflake.Peer, error) {
				ids, err := w.LiveWorkers(ctx)
				return ids, nil, err
			}
		}
	}
	if list == nil {
		return nil
	}
	lo, hi, err := cfg.workerRange()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &rangeWatch{lo: lo, hi: hi, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, list, src.WorkerID(), log)
	return w
}

// run scans until ctx ends. A failed scan keeps the last one and is logged
// at debug level: the source's own renewals report coordinator trouble.
func (w *rangeWatch) run(ctx context.Context, list liveHolders, self int64, log *slog.Logger) {
	defer close(w.done)
	t := time.NewTicker(rangeScanInterval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, rangeScanInterval/2)
		held, peers, err := list(sctx, self)
		cancel()
		if err != nil {
			log.Debug("snowflake: worker ID range scan failed", "err", err)
		} else {
			w.record(held, peers)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// record stores one scan: the distinct held IDs inside the range and the
// peers' mean clock offset.
func (w *rangeWatch) record(held []int64, peers []snowflake.Peer) {
	seen := make(map[int64]bool, len(held))
	for _, id := range held {
		if id >= w.lo && id <= w.hi {
			seen[id] = true
		}
	}
	r := api.WorkerRange{Min: w.lo, Max: w.hi, Held: int64(len(seen)), Peers: len(peers)}
	if len(peers) > 0 {
		var sum time.Duration
		for _, p := range peers {
			sum += p.Reported.Sub(p.ReadAt)
		}
		r.PeerOffset = sum / time.Duration(len(peers))
	}
	w.mu.Lock()
	w.last, w.scanned = r, true
	w.mu.Unlock()
}

// get returns the last scan; ok is false before the first.
func (w *rangeWatch) get() (api.WorkerRange, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.scanned
}

// stop ends the scanning goroutine and waits for it. nil-safe.
func (w *rangeWatch) stop() {
	if w != nil {
		w.cancel()
		<-w.done
	}
}

// sqlLiveHolders lists the unexpired lease rows. A row's clock report is
// compared at the local instant matching the row's write (the database's
// now minus the row's age), as sqllease's start check does.
func sqlLiveHolders(ls sqllease.Store) liveHolders {
	return func(ctx context.Context, self int64) ([]int64, []snowflake.Peer, error) {
		holders, dbNow, err := ls.LiveHolders(ctx)
		if err != nil {
			return nil, nil, err
		}
		now := time.Now()
		held := make([]int64, 0, len(holders))
		var peers []snowflake.Peer
		for _, h := range holders {
			held = append(held, h.WorkerID)
			if h.WorkerID == self || h.ClockMillis <= 0 {
				continue
			}
			peers = append(peers, snowflake.Peer{Name: h.Owner, Reported: time.UnixMilli(h.ClockMillis),
				ReadAt: now.Add(-dbNow.Sub(h.WrittenAt))})
		}
		return held, peers, nil
	}
}
