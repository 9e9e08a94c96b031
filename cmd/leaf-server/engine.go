package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaf-go/leaf/store"
)

// engineDetector is what every store of store/dsn offers: the database
// engine behind it, detected from the server (docs/contract.md §8).
type engineDetector interface {
	Engine(ctx context.Context) (store.Engine, error)
}

// engineTimeout bounds the detection queries at start.
const engineTimeout = 5 * time.Second

// logEngine logs the engine behind st, and each setting that endangers
// uniqueness or availability as a warning with its fix. A failed detection
// is logged and otherwise ignored: it must not keep the server from
// starting.
func logEngine(ctx context.Context, st store.Store, log *slog.Logger) {
	d, ok := st.(engineDetector)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	e, err := d.Engine(ctx)
	if err != nil {
		log.Warn("database engine not detected", "err", err)
		return
	}
	log.Info("database engine", "engine", e.Name, "version", e.Version)
	for _, w := range e.Warnings {
		log.Warn("database setting", "engine", e.Name, "warning", w)
	}
}
