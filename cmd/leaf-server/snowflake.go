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
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/snowflake/zkworker"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// snowflakeMode is the running snowflake generator and what its worker ID
// source needs at shutdown and on the status page.
type snowflakeMode struct {
	gen   *snowflake.Generator
	state func() any       // source state for /api/v1/snowflake/status; may be nil
	ready func() error     // non-nil error: the source cannot back new IDs (lost lease); may be nil
	beat  func() time.Time // last lease renewal or ZooKeeper upload; may be nil
	close func() error
}

// startSnowflake claims a worker ID from cfg.WorkerIDSource and builds the
// generator. The time high-water mark is persisted by the source: a file in
// the data dir for static, the ZooKeeper node plus Leaf's cache file for
// zookeeper. A restart with the clock behind the last run issues nothing
// until the clock has caught up.
func startSnowflake(ctx context.Context, cfg Config, st store.Store, log *slog.Logger) (*snowflakeMode, error) {
	var (
		workerID int64
		hw       snowflake.HighWater
		m        = &snowflakeMode{close: func() error { return nil }}
		layout   = cfg.Layout()
		settings = snowflake.Settings{Layout: layout, ZeroStart: !cfg.RandomStart}
	)
	settings.Clock = testClock(settings.Clock) // nil (the system clock) except in -tags leaftest builds
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
			Clock:    settings.Clock,
		})
		if err != nil {
			return nil, err
		}
		workerID, hw = w.ID(), w
		m.state = func() any { return zkState(w.Status()) }
		m.beat = func() time.Time { return w.Status().LastUpload }
		m.close = w.Close
	case "sql":
		ls, ok := st.(sqllease.Store)
		if !ok {
			return nil, fmt.Errorf("--worker-id-source sql: the store %s keeps no worker leases", dsn.Redact(cfg.DSN()))
		}
		owner := cfg.Listen
		if h, err := os.Hostname(); err == nil {
			owner = h + "/" + cfg.Listen
		}
		lease, err := sqllease.Start(ctx, ls, sqllease.Options{Owner: owner, Layout: layout, Logger: log, Clock: settings.Clock})
		if err != nil {
			return nil, err
		}
		workerID, hw = lease.WorkerID(), lease
		m.state = func() any { return leaseState(lease.State()) }
		m.beat = func() time.Time { return lease.State().LastRenewal }
		m.ready = func() error {
			select {
			case <-lease.Lost():
				return errors.New("worker ID lease lost: restart leaf-server to claim a new one")
			default:
			}
			if !time.Now().Before(lease.Expiry()) {
				return errors.New("worker ID lease may have expired (renewals failing): no snowflake IDs until one succeeds")
			}
			return nil
		}
		m.close = func() error {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return lease.Close(cctx) // releases the worker ID
		}
		go func() {
			select {
			case <-lease.Lost():
				log.Error("snowflake worker ID lease lost: this server issues no snowflake IDs until restarted", "worker_id", lease.WorkerID())
			case <-ctx.Done():
			}
		}()
		settings.Lease = lease
	default: // static
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, err
		}
		f := snowflake.NewFileHighWater(filepath.Join(cfg.DataDir, fmt.Sprintf("snowflake-%d.highwater", cfg.WorkerID)))
		workerID, hw = cfg.WorkerID, f
		log.Warn("static worker ID: two live servers with the same --worker-id issue duplicate IDs; keeping it unique is the operator's job",
			"worker_id", cfg.WorkerID, "highwater_file", f.Path())
	}
	settings.WorkerID, settings.HighWater = workerID, hw
	gen, err := snowflake.New(ctx, settings)
	if err != nil {
		_ = m.close()
		return nil, err
	}
	m.gen = gen
	floor := gen.Stats().Floor
	if cfg.writesDataDir() {
		if err := checkLayout(cfg.DataDir, layout, floor, time.Now()); err != nil {
			_ = m.close()
			return nil, err
		}
	}
	// After a restart the persisted mark may lie ahead of the clock (it is
	// written ahead of the IDs issued): until the clock passes it every
	// snowflake request is refused, so the server is not ready.
	sourceReady := m.ready
	m.ready = func() error {
		if sourceReady != nil {
			if err := sourceReady(); err != nil {
				return err
			}
		}
		if behind := time.Until(floor); behind > 0 {
			return fmt.Errorf("clock behind the persisted high-water mark by %v: no snowflake IDs until it passes", behind.Round(time.Millisecond))
		}
		return nil
	}
	l := gen.Layout()
	log.Info("snowflake mode on", "source", cfg.WorkerIDSource, "worker_id", gen.WorkerID(),
		"epoch_ms", l.EpochMillis(), "layout_end", l.End().Format("2006-01-02"))
	return m, nil
}

// rfc3339 formats t for the status API; the zero time is "".
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// zkState is the ZooKeeper source's state as /api/v1/snowflake/status shows it.
func zkState(s zkworker.Status) map[string]any {
	return map[string]any{
		"workerId": s.WorkerID, "source": s.Source, "address": s.Address, "node": s.Node,
		"cachePath": s.CachePath, "session": s.State, "mark": rfc3339(s.Mark),
		"uploaded": rfc3339(s.Uploaded), "lastUpload": rfc3339(s.LastUpload), "uploadError": s.UploadError,
	}
}

// leaseState is the SQL lease's state as /api/v1/snowflake/status shows it.
func leaseState(s sqllease.State) map[string]any {
	return map[string]any{
		"workerId": s.WorkerID, "generation": s.Generation, "owner": s.Owner,
		"ttlMs": s.TTL.Milliseconds(), "renewMs": s.Renew.Milliseconds(), "marginMs": s.Margin.Milliseconds(),
		"expires": rfc3339(s.Expires), "lastRenewal": rfc3339(s.LastRenewal), "dbExpires": rfc3339(s.DBExpires),
		"highWater": rfc3339(s.HighWater), "renewals": s.Renewals, "renewFailures": s.RenewFailures,
		"consecutiveFailures": s.ConsecutiveFailures, "lastError": s.LastError, "lost": s.Lost, "closed": s.Closed,
	}
}
