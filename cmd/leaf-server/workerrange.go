package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/etcdworker"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/snowflake/zkworker"
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

// watchWorkerRange starts scanning the worker ID range of the claim sup has
// in use every rangeScanInterval, the first scan at once; after a re-claim
// it scans through the new claim. It returns nil for the static source.
// ZooKeeper's range is the layout's whole worker ID space: Leaf's layout
// numbers its nodes from 0 and has no range flags.
func watchWorkerRange(ctx context.Context, cfg Config, sup *snowflakeSupervisor, log *slog.Logger) *rangeWatch {
	var lo, hi int64
	switch cfg.WorkerIDSource {
	case "sql", "etcd", "kubernetes":
		var err error
		if lo, hi, err = cfg.workerRange(); err != nil {
			return nil
		}
	case "zookeeper":
		if l := cfg.Layout(); l.WorkerBits >= 0 && l.WorkerBits <= 62 {
			hi = l.MaxWorker()
		}
	default:
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &rangeWatch{lo: lo, hi: hi, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, sup.holders, log)
	return w
}

// run scans until ctx ends. A failed scan keeps the last one and is logged
// at debug level: the source's own renewals report coordinator trouble.
// current returns the lister of the claim in use and its worker ID; a nil
// lister (no claim serves yet) skips the scan.
func (w *rangeWatch) run(ctx context.Context, current func() (liveHolders, int64), log *slog.Logger) {
	defer close(w.done)
	t := time.NewTicker(rangeScanInterval)
	defer t.Stop()
	for {
		if list, self := current(); list != nil {
			sctx, cancel := context.WithTimeout(ctx, rangeScanInterval/2)
			held, peers, err := list(sctx, self)
			cancel()
			if err != nil {
				log.Debug("snowflake: worker ID range scan failed", "err", err)
			} else {
				w.record(held, peers)
			}
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

// zkTakenHolders lists the worker IDs that a /forever node carries
// (zkworker.Worker.TakenWorkers): in Leaf's layout those stay with their
// address, so they are not free. Holders' clocks are not compared here (the
// ZooKeeper source checks its peers itself).
func zkTakenHolders(w *zkworker.Worker) liveHolders {
	return func(ctx context.Context, _ int64) ([]int64, []snowflake.Peer, error) {
		ids, err := w.TakenWorkers(ctx)
		return ids, nil, err
	}
}

// etcdLiveHolders lists the worker IDs whose key exists (a key lives only
// as long as its holder's etcd lease). Holders' clocks are not compared here.
func etcdLiveHolders(w *etcdworker.Worker) liveHolders {
	return func(ctx context.Context, _ int64) ([]int64, []snowflake.Peer, error) {
		ids, err := w.LiveWorkers(ctx)
		return ids, nil, err
	}
}
