package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/etcdworker"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/snowflake/zkworker"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// sourceCloseTimeout bounds the release of the worker ID at shutdown (the
// SQL lease's row; a ZooKeeper upload still in flight).
const sourceCloseTimeout = 5 * time.Second

// startSnowflake claims a worker ID from cfg.WorkerIDSource and builds the
// generator on it. The source keeps the time high-water mark: a file in the
// data dir for static, the ZooKeeper node plus Leaf's cache file for
// zookeeper, the lease row for sql, the <prefix>/highwater/<id> key for etcd
// (whose lease is revoked by closeSource, freeing the ID at once). A restart with the clock behind the last
// run issues nothing until the clock has caught up. The caller closes the
// source (closeSource) after the server has stopped.
func startSnowflake(ctx context.Context, cfg Config, st store.Store, log *slog.Logger) (*snowflake.Generator, snowflake.Source, error) {
	layout := cfg.Layout()
	clock := testClock(nil) // nil (the system clock) except in -tags leaftest builds
	src, err := claimWorkerID(ctx, cfg, st, layout, clock, log)
	if err != nil {
		return nil, nil, err
	}
	// HighWaterTimeout: no snowflake request waits on the mark's store (a lease database
	// round trip for sql) longer than --wait-timeout.
	gen, err := snowflake.New(ctx, snowflake.Settings{Layout: layout, ZeroStart: !cfg.RandomStart, Clock: clock, Source: src,
		HighWaterTimeout: cfg.WaitTimeout})
	if err != nil {
		_ = closeSource(src)
		return nil, nil, err
	}
	if cfg.writesDataDir() {
		if err := checkLayout(cfg.DataDir, layout, gen.Stats().Floor, time.Now()); err != nil {
			_ = closeSource(src)
			return nil, nil, err
		}
	}
	// The mark is kept ahead of the clock in the background until shutdown begins (ctx is
	// the signal context), so that requests rarely wait for a store, even after a quiet spell.
	go gen.KeepAhead(ctx)
	l := gen.Layout()
	warnLayoutEnd(log, l, time.Now())
	log.Info("snowflake mode on", "source", src.Name(), "worker_id", gen.WorkerID(),
		"epoch_ms", l.EpochMillis(), "layout_end", l.End().Format("2006-01-02"))
	return gen, sealingSource{Source: src, gen: gen, log: log}, nil
}

// sealingSource is the source as run holds it: Close (at shutdown, after the HTTP server has
// drained) first seals the generator, which stores the exact last issued millisecond where the
// source can (static file, ZooKeeper cache file and node), so that a restart with a correct
// clock issues at once instead of waiting out the high-water window. A crash skips this, and
// the restart waits for the mark stored ahead of the clock, as it must.
type sealingSource struct {
	snowflake.Source
	gen *snowflake.Generator
	log *slog.Logger
}

// Close seals the generator, then closes the source.
func (s sealingSource) Close(ctx context.Context) error {
	if err := s.gen.Seal(ctx); err != nil {
		s.log.Warn("snowflake: the exact last issued millisecond was not stored; the next start waits for the stored mark", "err", err)
	} else if last := s.gen.Stats().LastIssued; !last.IsZero() {
		s.log.Info("snowflake: sealed; the next start may issue from just after the last issued millisecond", "last_issued", last)
	}
	return s.Source.Close(ctx)
}

// layoutEndWarn: a layout that ends sooner than this after the start is
// warned about at every start.
const layoutEndWarn = 20 * 365 * 24 * time.Hour

// warnLayoutEnd logs a warning when l ends within layoutEndWarn of now
// (issue 16 item 9: --epoch-ms 0 with 41 time bits ends on 2039-09-07 and
// was accepted with an INFO line). It warns rather than refuses: a deployment
// that already issues IDs on that layout cannot move its epoch without
// repeating IDs (the layout guard refuses such a change), and refusing would
// only take it down. Leaf's fixed epoch is snowflake.DefaultEpochMillis.
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

// claimWorkerID opens the worker ID source that cfg.WorkerIDSource names.
func claimWorkerID(ctx context.Context, cfg Config, st store.Store, layout snowflake.Layout, clock snowflake.Clock, log *slog.Logger) (snowflake.Source, error) {
	switch cfg.WorkerIDSource {
	case "zookeeper":
		port := cfg.SnowflakePort
		if port == "" {
			_, p, err := net.SplitHostPort(cfg.Listen)
			if err != nil {
				return nil, fmt.Errorf("--listen %q: %w", cfg.Listen, err)
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
		})
		if err != nil {
			return nil, err
		}
		return w, nil
	case "sql":
		ls, ok := st.(sqllease.Store)
		if !ok {
			return nil, fmt.Errorf("--worker-id-source sql: the store %s keeps no worker leases", dsn.Redact(cfg.DSN()))
		}
		owner := cfg.Listen
		if h, err := os.Hostname(); err == nil {
			owner = h + "/" + cfg.Listen
		}
		lo, hi, err := cfg.workerRange()
		if err != nil {
			return nil, err
		}
		lease, err := sqllease.Claim(ctx, ls, sqllease.Options{
			Owner: owner, Layout: layout, Logger: log, Clock: leaseClock(clock),
			Workers: &sqllease.Range{Min: lo, Max: hi}, MaxPeerClockSkew: cfg.MaxPeerClockSkew,
		})
		if err != nil {
			return nil, err
		}
		go func() {
			select {
			case <-lease.Lost():
				log.Error("snowflake worker ID lease lost: this server issues no snowflake IDs until restarted", "worker_id", lease.WorkerID())
			case <-ctx.Done():
			}
		}()
		return lease, nil
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
			return nil, err
		}
		go func() {
			select {
			case <-w.Lost():
				log.Error("snowflake worker ID lost in etcd: this server issues no snowflake IDs until restarted", "worker_id", w.WorkerID(), "key", w.Key())
			case <-ctx.Done():
			}
		}()
		return w, nil
	case "kubernetes":
		return claimKubernetes(ctx, cfg, layout, clock, log)
	default: // static
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, err
		}
		src := snowflake.NewStaticSource(cfg.WorkerID, filepath.Join(cfg.DataDir, fmt.Sprintf("snowflake-%d.highwater", cfg.WorkerID)))
		log.Warn("static worker ID: two live servers with the same --worker-id issue duplicate IDs; keeping it unique is the operator's job",
			"worker_id", cfg.WorkerID, "highwater_file", src.Path())
		return src, nil
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
