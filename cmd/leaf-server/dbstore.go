package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// openAttemptTimeout bounds one attempt to open the segment database
// (connect, ping, migrations). A database that black-holes the connection at
// start delays the start by this much before the server serves snowflake
// mode and retries segment mode in the background.
const openAttemptTimeout = 5 * time.Second

// Backoff between attempts to open a segment database that did not answer at
// start: openRetryMin doubling up to openRetryMax.
const (
	openRetryMin = 200 * time.Millisecond
	openRetryMax = 10 * time.Second
)

// startFunc opens a store built by dsn.New: connect, ping, and the
// migrations when migrate is true.
type startFunc func(ctx context.Context, migrate bool) error

// openSegmentStore opens the database of --segment-dsn, with the migrations
// when cfg.Migrate, trying for at most openAttemptTimeout. A server database
// (PostgreSQL, MySQL) that does not answer does not stop the start when
// only segment mode needs it (issue 16 item 10; Leaf starts with an empty
// cache and serves once its refresh succeeds, and so does leaf-server):
// openSegmentStore logs why and returns the store not yet open (built by
// dsn.New: every call fails at once with [store.ErrNotOpen], so segment
// routes answer -1 or -3 and /readyz says why) with its start, which
// startSegment retries in the background (retryStart); start is nil when
// the store is open. It returns an error for a malformed DSN, for SQLite (a
// local file: nothing to wait for), for [store.ErrPermanent] (the database
// does not exist or refused the credentials: waiting does not help), and
// when snowflake mode takes its worker ID from the database
// (--worker-id-source sql), which cannot start without it.
func openSegmentStore(ctx context.Context, cfg Config, log *slog.Logger) (st store.Store, start startFunc, err error) {
	c, err := dsn.Parse(cfg.DSN())
	if err != nil {
		return nil, nil, fmt.Errorf("open store %s: %w", dsn.Redact(cfg.DSN()), err)
	}
	openErr := func(err error) error { return fmt.Errorf("open store %s: %w", dsn.Redact(cfg.DSN()), err) }
	actx, cancel := context.WithTimeout(ctx, openAttemptTimeout)
	defer cancel()
	if c.Dialect == dsn.SQLite {
		st, err := dsn.Open(actx, cfg.DSN(), cfg.Migrate)
		if err != nil {
			return nil, nil, openErr(err)
		}
		logEngine(ctx, st, log)
		return st, nil, nil
	}
	st, start, err = dsn.New(cfg.DSN())
	if err != nil {
		return nil, nil, openErr(err)
	}
	switch err := start(actx, cfg.Migrate); {
	case err == nil:
		logEngine(ctx, st, log)
		return st, nil, nil
	case ctx.Err() != nil || errors.Is(err, store.ErrPermanent):
		_ = st.Close() // never opened: nothing to report beside err
		return nil, nil, openErr(err)
	case cfg.SnowflakeEnabled && cfg.WorkerIDSource == "sql":
		_ = st.Close()
		return nil, nil, fmt.Errorf("%w; snowflake mode takes its worker ID from this database (--worker-id-source sql, "+
			"the default with a shared database), so leaf-server cannot start until it answers: start the database, "+
			"or give snowflake mode a worker ID of its own (--worker-id N, unique per server, or --worker-id-source "+
			"zookeeper, etcd or kubernetes), or turn it off (--snowflake=false)", openErr(err))
	default:
		log.Error("segment database not reachable at start: snowflake mode serves; segment routes answer -1 or -3 and /readyz says why until it answers (then the migrations run); retrying in the background",
			"store", dsn.Redact(cfg.DSN()), "err", err)
		return st, start, nil
	}
}

// retryStart calls start, the open of the segment database that failed at
// start, in a goroutine, with a backoff of openRetryMin doubling to
// openRetryMax and at most openAttemptTimeout per attempt, until it
// succeeds; then it runs onOpen there (what a start with the database up
// does: the demo tag, the engine log, a tag refresh) and ends. stop cancels
// it and waits for it (an attempt or onOpen in flight sees its context
// cancelled).
func retryStart(start startFunc, cfg Config, log *slog.Logger, onOpen func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := openRetryMin
		for {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, openRetryMax)
			actx, cancelAttempt := context.WithTimeout(ctx, openAttemptTimeout)
			err := start(actx, cfg.Migrate)
			cancelAttempt()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("segment database still not reachable; segment routes answer -1 or -3 until it answers",
					"store", dsn.Redact(cfg.DSN()), "err", err, "next_attempt_in", wait)
				continue
			}
			log.Info("segment database reachable: opened", "store", dsn.Redact(cfg.DSN()), "migrated", cfg.Migrate)
			onOpen(ctx)
			return
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
