package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/etcdworker"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/snowflake/zkworker"
	"github.com/leaf-go/leaf/store"
)

// sourceCloseTimeout bounds the release of the worker ID at shutdown (the
// SQL lease's row; a ZooKeeper upload still in flight).
const sourceCloseTimeout = 5 * time.Second

// startSnowflake claims a worker ID from cfg.WorkerIDSource, builds the generator on it and
// starts the supervisor that claims again whenever a lease source loses its claim
// (snowflakeSupervisor). The source keeps the time high-water mark: a file in the data dir for
// static, the ZooKeeper node plus Leaf's cache file for zookeeper, the lease row for sql, the
// <prefix>/highwater/<id> key for etcd (whose lease is revoked at Close, freeing the ID at
// once). A restart with the clock behind the last run issues nothing until the clock has
// caught up. The caller closes the supervisor after the server has stopped.
func startSnowflake(ctx context.Context, cfg Config, st store.Store, log *slog.Logger) (*snowflakeSupervisor, error) {
	clock := testClock(nil) // nil (the system clock) except in -tags leaftest builds
	build := func(ctx context.Context) (claimed, error) {
		return claimSnowflake(ctx, cfg, st, clock, log)
	}
	first, err := build(ctx)
	if errors.Is(err, zkworker.ErrUnreachable) {
		// Fail closed (issue 20 item 3): serve no snowflake ID, and claim as soon as
		// ZooKeeper answers (the supervisor's re-claim).
		first, err = unclaimedSnowflake(ctx, cfg, clock, err, log)
	}
	if err != nil {
		return nil, err
	}
	if cfg.writesDataDir() {
		if err := checkLayout(cfg.DataDir, first.gen.Layout(), first.gen.Stats().Floor, time.Now()); err != nil {
			return nil, errors.Join(err, first.close(log))
		}
	}
	l := first.gen.Layout()
	warnLayoutEnd(log, l, time.Now())
	perMs, workers := l.Capacity()
	log.Info("snowflake mode on", "source", first.src.Name(), "worker_id", first.gen.WorkerID(),
		"epoch_ms", l.EpochMillis(), "layout_end", l.End().Format("2006-01-02"),
		"id_bits", l.Bits(), "max_id", l.MaxID(), "ids_per_ms_per_worker", perMs, "workers", workers)
	return superviseSnowflake(ctx, first, build, log), nil
}

// claimed is one claim of a worker ID with the generator built on it.
type claimed struct {
	gen *snowflake.Generator
	src snowflake.Source
	// lost is closed when the claim is lost for good (a lease source's Lost); nil for a
	// source that cannot lose its claim (static).
	lost <-chan struct{}
	// holders lists the live holders of the claim's worker ID range (workerClaim.holders);
	// nil for none.
	holders liveHolders
	// stop ends the generator's KeepAhead.
	stop context.CancelFunc
}

// claimSnowflake claims a worker ID through the normal claim path (which holds back a claim
// that finds no history) and builds a generator on it, keeping its mark ahead of the clock in
// the background until the claim is closed.
func claimSnowflake(ctx context.Context, cfg Config, st store.Store, clock snowflake.Clock, log *slog.Logger) (claimed, error) {
	layout := cfg.Layout()
	wc, err := claimWorkerID(ctx, cfg, st, layout, clock, log)
	if err != nil {
		return claimed{}, err
	}
	src := wc.src
	// HighWaterTimeout: no snowflake request waits on the mark's store (a lease database
	// round trip for sql) longer than --wait-timeout.
	gen, err := snowflake.New(ctx, snowflake.Settings{Layout: layout, ZeroStart: !cfg.RandomStart, Clock: clock, Source: src,
		HighWaterTimeout: cfg.WaitTimeout})
	if err != nil {
		_ = closeSource(src)
		return claimed{}, err
	}
	// The mark is kept ahead of the clock in the background until shutdown begins (ctx is the
	// signal context, or the supervisor's below it) or the claim is closed, so that requests
	// rarely wait for a store, even after a quiet spell.
	kctx, stop := context.WithCancel(ctx)
	go gen.KeepAhead(kctx)
	return claimed{gen: gen, src: src, lost: wc.lost, holders: wc.holders, stop: stop}, nil
}

// close seals the generator, which stores the exact last issued millisecond where the source
// can (static file, ZooKeeper cache file and node, the lease row or key), so that a restart
// with a correct clock issues at once instead of waiting out the high-water window, then
// closes the source (releasing the worker ID unless the claim was lost). A crash skips this,
// and the restart waits for the mark stored ahead of the clock, as it must.
func (c claimed) close(log *slog.Logger) error {
	c.stop()
	ctx, cancel := context.WithTimeout(context.Background(), sourceCloseTimeout)
	defer cancel()
	if err := c.gen.Seal(ctx); err != nil {
		log.Warn("snowflake: the exact last issued millisecond was not stored; the next start waits for the stored mark", "err", err)
	} else if last := c.gen.Stats().LastIssued; !last.IsZero() {
		log.Info("snowflake: sealed; the next start may issue from just after the last issued millisecond", "last_issued", last)
	}
	if err := c.src.Close(ctx); err != nil {
		return fmt.Errorf("close worker ID source %s: %w", c.src.Name(), err)
	}
	return nil
}

// Re-claim back-off: the first retry after a failed claim comes after reclaimRetryMin, each
// next one after twice as long, at most reclaimRetryMax.
const (
	reclaimRetryMin = time.Second
	reclaimRetryMax = 15 * time.Second
)

// snowflakeSupervisor keeps snowflake mode serving across lost claims (issue 20 item 4: a
// coordinator's data loss costs one detection window, never a fleet outage). When the claim in
// use is lost (its source's Lost), the old generator already refuses every request (its
// source's Expiry is in the past for good); the supervisor then claims again through the
// normal claim path, builds a new generator on the new claim and swaps the pair into the slot
// the HTTP layer reads, atomically. Meanwhile /readyz is 503 with the loss and the claim's
// progress. A claim that fails is retried with back-off until Close. Safe for concurrent use.
type snowflakeSupervisor struct {
	slot   *api.SnowflakeSlot
	build  func(context.Context) (claimed, error)
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned

	mu sync.Mutex // guards the fields below
	// cur is the claim in use.
	cur claimed
	// lostErr is the loss being recovered from (nil while a claim serves); attempts and
	// lastErr are the re-claim's failed attempts and the last one's error.
	lostErr  error
	attempts int
	lastErr  error
}

// superviseSnowflake puts first in use and starts watching it; it stops when ctx ends or at
// Close.
func superviseSnowflake(ctx context.Context, first claimed, build func(context.Context) (claimed, error), log *slog.Logger) *snowflakeSupervisor {
	ctx, cancel := context.WithCancel(ctx)
	s := &snowflakeSupervisor{slot: &api.SnowflakeSlot{}, build: build, log: log, cancel: cancel, done: make(chan struct{}), cur: first}
	s.slot.Store(first.gen, supervisedSource{first.src, s})
	go s.run(ctx)
	return s
}

// Slot is what the HTTP layer serves from (api.Deps.SnowflakeSlot).
func (s *snowflakeSupervisor) Slot() *api.SnowflakeSlot { return s.slot }

// run waits for the claim in use to be lost, then claims again until one succeeds.
func (s *snowflakeSupervisor) run(ctx context.Context) {
	defer close(s.done)
	for {
		s.mu.Lock()
		cur := s.cur
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-cur.lost:
		}
		lostErr := cur.src.Ready()
		if lostErr == nil {
			lostErr = errors.New("worker ID claim lost")
		}
		s.mu.Lock()
		s.lostErr, s.attempts, s.lastErr = lostErr, 0, nil
		s.mu.Unlock()
		s.log.Error("snowflake worker ID lost: no snowflake IDs until a new claim serves; claiming again",
			"worker_id", cur.gen.WorkerID(), "source", cur.src.Name(), "reason", lostErr)
		next, ok := s.reclaim(ctx)
		if !ok {
			return
		}
		s.mu.Lock()
		s.cur, s.lostErr, s.attempts, s.lastErr = next, nil, 0, nil
		s.mu.Unlock()
		s.slot.Store(next.gen, supervisedSource{next.src, s})
		s.log.Info("snowflake worker ID claimed again: the new generator is in use", "source", next.src.Name(),
			"worker_id", next.gen.WorkerID(), "old_worker_id", cur.gen.WorkerID(), "ready", errString(next.gen.Ready()))
		if err := cur.close(s.log); err != nil {
			s.log.Warn("closing the lost claim", "err", err)
		}
	}
}

// reclaim claims until a claim succeeds (true) or ctx ends (false).
func (s *snowflakeSupervisor) reclaim(ctx context.Context) (claimed, bool) {
	wait := reclaimRetryMin
	for {
		next, err := s.build(ctx)
		if err == nil {
			return next, true
		}
		if ctx.Err() != nil {
			return claimed{}, false
		}
		s.mu.Lock()
		s.attempts++
		s.lastErr = err
		n := s.attempts
		s.mu.Unlock()
		s.log.Warn("snowflake worker ID re-claim failed; retrying", "attempt", n, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return claimed{}, false
		case <-t.C:
		}
		wait = min(2*wait, reclaimRetryMax)
	}
}

// holders returns the live-holder lister of the claim in use and its worker ID; a nil lister
// while a lost claim is being replaced, or for a source without a range.
func (s *snowflakeSupervisor) holders() (liveHolders, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lostErr != nil {
		return nil, 0
	}
	return s.cur.holders, s.cur.gen.WorkerID()
}

// reclaiming returns, while a lost claim is being replaced, why no claim serves; nil otherwise.
func (s *snowflakeSupervisor) reclaiming() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lostErr == nil {
		return nil
	}
	msg := fmt.Sprintf("claiming a new worker ID after a loss (%v)", s.lostErr)
	if s.lastErr != nil {
		msg += fmt.Sprintf("; %d failed attempts, the last: %v", s.attempts, s.lastErr)
	}
	return errors.New(msg)
}

// Close stops the supervisor (a re-claim in progress is abandoned) and closes the claim in
// use: seals its generator and releases its worker ID. It returns the release's error.
func (s *snowflakeSupervisor) Close() error {
	s.cancel()
	<-s.done
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	return cur.close(s.log)
}

// supervisedSource is the claim's source as the HTTP layer sees it: while the supervisor
// replaces a lost claim, Ready says so.
type supervisedSource struct {
	snowflake.Source
	sup *snowflakeSupervisor
}

// Ready is the re-claim's state while one runs, else the source's Ready.
func (s supervisedSource) Ready() error {
	if err := s.sup.reclaiming(); err != nil {
		return err
	}
	return s.Source.Ready()
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// layoutEndWarn: a layout that ends sooner than this after the start is
// warned about at every start.
const layoutEndWarn = 20 * 365 * 24 * time.Hour

// warnLayoutEnd logs a warning when l ends within layoutEndWarn of now
// (issue 16 item 9: --epoch-ms 0 with 41 time bits ends on 2039-09-07 and
// was accepted with an INFO line). Between a year (snowflake.MinRunway, below
// which Config.validate refuses the layout) and 20 years it warns rather than
// refuses: a deployment that already issues IDs on that layout cannot move
// its epoch without repeating IDs (the layout guard refuses such a change),
// and refusing years ahead would only take it down. Leaf's fixed epoch is
// snowflake.DefaultEpochMillis.
func warnLayoutEnd(log *slog.Logger, l snowflake.Layout, now time.Time) {
	left := l.End().Sub(now)
	if left >= layoutEndWarn {
		return
	}
	msg := "snowflake layout runs out soon: from layout_end on every snowflake request fails (time_outside_layout)"
	if l.EpochMillis() == 0 {
		msg = "--epoch-ms 0 is the Unix epoch, not Leaf's: the snowflake layout runs out soon; from layout_end on every snowflake request fails (time_outside_layout)"
	}
	log.Warn(msg, "layout_end", l.End().Format("2006-01-02"), "years_left", fmt.Sprintf("%.1f", left.Hours()/(24*365.25)),
		"epoch_ms", l.EpochMillis(), "time_bits", l.TimeBits,
		"fix", fmt.Sprintf("a new deployment: keep the default --epoch-ms %d (Leaf's, ends %s with 41 time bits); "+
			"one that already issued IDs cannot change the epoch without repeating IDs: plan the move to new IDs before layout_end",
			snowflake.DefaultEpochMillis, snowflake.DefaultLayout().End().Format("2006-01-02")))
}

// workerClaim is a worker ID source just opened by claimWorkerID.
type workerClaim struct {
	src snowflake.Source
	// lost is closed when the claim is lost for good (the lease sources); nil for a source
	// that cannot lose it so.
	lost <-chan struct{}
	// holders lists the live holders of the source's worker ID range for /metrics
	// (watchWorkerRange); nil for a source without a range (static, zookeeper).
	holders liveHolders
}

// claimWorkerID opens the worker ID source that cfg.WorkerIDSource names.
func claimWorkerID(ctx context.Context, cfg Config, st store.Store, layout snowflake.Layout, clock snowflake.Clock, log *slog.Logger) (workerClaim, error) {
	switch cfg.WorkerIDSource {
	case "zookeeper":
		port := cfg.SnowflakePort
		if port == "" {
			_, p, err := net.SplitHostPort(cfg.Listen)
			if err != nil {
				return workerClaim{}, fmt.Errorf("--listen %q: %w", cfg.Listen, err)
			}
			port = p
		}
		w, err := zkworker.Claim(ctx, zkworker.Options{
			Servers:  strings.Split(cfg.ZK, ","),
			LeafName: cfg.LeafName,
			IP:       cfg.AdvertiseIP,
			Port:     port,
			Layout:   layout,
			Logger:   log,
			Clock:    clock,

			MaxPeerClockSkew: cfg.MaxPeerClockSkew,
			CacheStart:       cfg.ZKCacheStart,
		})
		if err != nil {
			return workerClaim{}, err
		}
		return workerClaim{src: w, lost: w.Lost(), holders: zkTakenHolders(w)}, nil
	case "sql":
		owner := cfg.Listen
		if h, err := os.Hostname(); err == nil {
			owner = h + "/" + cfg.Listen
		}
		lo, hi, err := cfg.workerRange()
		if err != nil {
			return workerClaim{}, err
		}
		lease, err := sqllease.Claim(ctx, st, sqllease.Options{
			Owner: owner, Layout: layout, Logger: log, Clock: leaseClock(clock),
			Workers: &sqllease.Range{Min: lo, Max: hi}, MaxPeerClockSkew: cfg.MaxPeerClockSkew,
		})
		if err != nil {
			return workerClaim{}, err
		}
		return workerClaim{src: lease, lost: lease.Lost(), holders: sqlLiveHolders(st)}, nil
	case "etcd":
		owner := fmt.Sprintf("%s pid %d", cfg.Listen, os.Getpid())
		if h, err := os.Hostname(); err == nil {
			owner = h + "/" + owner
		}
		o := etcdworker.Options{
			Endpoints: strings.Split(cfg.EtcdEndpoints, ","),
			Prefix:    cfg.etcdPrefix(),
			Username:  cfg.EtcdUsername, Password: cfg.EtcdPassword,
			CertFile: cfg.EtcdCert, KeyFile: cfg.EtcdKey, CAFile: cfg.EtcdCACert,
			Owner:     owner,
			Layout:    layout,
			MinWorker: cfg.WorkerIDMin, MaxWorker: cfg.WorkerIDMax,
			MaxPeerClockSkew: cfg.MaxPeerClockSkew,
			Logger:           log,
		}
		o.Clock = leaseClock(clock)
		w, err := etcdworker.Claim(ctx, o)
		if err != nil {
			return workerClaim{}, etcdStartError(ctx, cfg.EtcdEndpoints, err)
		}
		return workerClaim{src: w, lost: w.Lost(), holders: etcdLiveHolders(w)}, nil
	case "kubernetes":
		return claimKubernetes(ctx, cfg, layout, clock, log)
	default: // static
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return workerClaim{}, err
		}
		src := snowflake.NewStaticSource(cfg.WorkerID, filepath.Join(cfg.DataDir, fmt.Sprintf("snowflake-%d.highwater", cfg.WorkerID)))
		log.Warn("static worker ID: two live servers with the same --worker-id issue duplicate IDs; keeping it unique is the operator's job",
			"worker_id", cfg.WorkerID, "highwater_file", src.Path())
		return workerClaim{src: src}, nil
	}
}

// leaseClock is the lease sources' clock: the generator's (nil: the system clock) with the
// system boot clock.
func leaseClock(c snowflake.Clock) lease.Clock {
	if c == nil {
		return lease.SystemClock{}
	}
	return lease.WithBoot(c.Now)
}

// workerRange returns the worker IDs a lease source claims: --worker-id-min
// to --worker-id-max, -1 as the max meaning the layout's largest. A range
// that is empty or leaves the layout is an error naming the flags.
func (c Config) workerRange() (lo, hi int64, err error) {
	l := c.Layout()
	if l.WorkerBits < 0 || l.WorkerBits > 62 {
		return 0, 0, nil // the layout's own error is reported
	}
	top := l.MaxWorker()
	lo, hi = c.WorkerIDMin, c.WorkerIDMax
	if hi == -1 {
		hi = top
	}
	if lo < 0 || hi < lo || hi > top {
		return 0, 0, fmt.Errorf("--worker-id-min %d / --worker-id-max %d: want 0 <= min <= max <= %d (%d worker bits; -1 as max means %d)",
			c.WorkerIDMin, c.WorkerIDMax, top, l.WorkerBits, top)
	}
	return lo, hi, nil
}

// closeSource releases the worker ID of src (a SQL lease's row), waiting at
// most sourceCloseTimeout.
func closeSource(src snowflake.Source) error {
	ctx, cancel := context.WithTimeout(context.Background(), sourceCloseTimeout)
	defer cancel()
	if err := src.Close(ctx); err != nil {
		return fmt.Errorf("close worker ID source %s: %w", src.Name(), err)
	}
	return nil
}
