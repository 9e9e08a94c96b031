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
// zookeeper, the lease row for sql. A restart with the clock behind the last
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
	log.Info("snowflake mode on", "source", src.Name(), "worker_id", gen.WorkerID(),
		"epoch_ms", l.EpochMillis(), "layout_end", l.End().Format("2006-01-02"))
	return gen, src, nil
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
		lease, err := sqllease.Start(ctx, ls, sqllease.Options{
			Owner: owner, Layout: layout, Logger: log, Clock: clock,
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
