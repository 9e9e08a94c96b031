package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/zkworker"
)

// snowflakeMode is the running snowflake generator and what its worker ID
// source needs at shutdown and on the status page.
type snowflakeMode struct {
	gen   *snowflake.Generator
	state func() any // source state for /api/v1/snowflake/status; may be nil
	close func() error
}

// startSnowflake claims a worker ID from cfg.WorkerIDSource and builds the
// generator. The time high-water mark is persisted by the source: a file in
// the data dir for static, the ZooKeeper node plus Leaf's cache file for
// zookeeper. A restart with the clock behind the last run issues nothing
// until the clock has caught up.
func startSnowflake(ctx context.Context, cfg Config, log *slog.Logger) (*snowflakeMode, error) {
	var (
		workerID int64
		hw       snowflake.HighWater
		m        = &snowflakeMode{close: func() error { return nil }}
	)
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
			Logger:   log,
		})
		if err != nil {
			return nil, err
		}
		workerID, hw = w.ID(), w
		m.state = func() any { return w.Status() }
		m.close = w.Close
	default: // static
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, err
		}
		f := snowflake.NewFileHighWater(filepath.Join(cfg.DataDir, fmt.Sprintf("snowflake-%d.highwater", cfg.WorkerID)))
		workerID, hw = cfg.WorkerID, f
		log.Warn("static worker ID: two live servers with the same --worker-id issue duplicate IDs; keeping it unique is the operator's job",
			"worker_id", cfg.WorkerID, "highwater_file", f.Path())
	}
	gen, err := snowflake.New(ctx, snowflake.Settings{WorkerID: workerID, HighWater: hw})
	if err != nil {
		_ = m.close()
		return nil, err
	}
	m.gen = gen
	l := gen.Layout()
	log.Info("snowflake mode on", "source", cfg.WorkerIDSource, "worker_id", gen.WorkerID(),
		"epoch_ms", l.EpochMillis(), "layout_end", l.End().Format("2006-01-02"))
	return m, nil
}
