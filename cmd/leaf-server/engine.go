package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaf-go/leaf/store"
)

// engineTimeout bounds the detection queries at start.
const engineTimeout = 5 * time.Second

// logEngine logs the engine behind st, and each setting that endangers
// uniqueness or availability as a warning with its fix. A failed detection
// is logged and otherwise ignored: it must not keep the server from
// starting.
func logEngine(ctx context.Context, st store.Store, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	e, err := st.Engine(ctx)
	if err != nil {
		log.Warn("database engine not detected", "err", err)
		return
	}
	log.Info("database engine", "engine", e.Name, "version", e.Version)
	for _, w := range e.Warnings {
		log.Warn("database setting", "engine", e.Name, "warning", w)
	}
}
