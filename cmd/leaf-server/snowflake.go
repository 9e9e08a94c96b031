package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/leaf-go/leaf/snowflake"
)

// startSnowflake builds the snowflake generator for cfg. Its time high-water
// mark lives in <data-dir>/snowflake-<worker>.highwater so a restart with the
// clock behind the last run issues nothing until the clock has caught up.
func startSnowflake(ctx context.Context, cfg Config, log *slog.Logger) (*snowflake.Generator, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	hw := snowflake.NewFileHighWater(filepath.Join(cfg.DataDir, fmt.Sprintf("snowflake-%d.highwater", cfg.WorkerID)))
	gen, err := snowflake.New(ctx, snowflake.Settings{WorkerID: cfg.WorkerID, HighWater: hw})
	if err != nil {
		return nil, err
	}
	l := gen.Layout()
	log.Info("snowflake mode on", "source", cfg.WorkerIDSource, "worker_id", gen.WorkerID(),
		"epoch_ms", l.EpochMillis(), "layout_end", l.End().Format("2006-01-02"), "highwater_file", hw.Path())
	if cfg.WorkerIDSource == "static" {
		log.Warn("static worker ID: two live servers with the same --worker-id issue duplicate IDs; keeping it unique is the operator's job")
	}
	return gen, nil
}
