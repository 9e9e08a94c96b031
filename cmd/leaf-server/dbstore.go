package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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

// openSegmentStore opens the database of --segment-dsn, with the migrations when
// cfg.Migrate, trying for at most openAttemptTimeout. A server database
// (PostgreSQL, MySQL) that does not answer does not stop the start when only
// segment mode needs it: openSegmentStore logs why and returns a [lazyStore] that
// keeps trying. It returns an error for a malformed DSN, for SQLite (a local
// file: nothing to wait for), for [store.ErrPermanent] (the database does
// not exist or refused the credentials: waiting does not help), and when snowflake mode takes its worker ID
// from the database (--worker-id-source sql), which cannot start without it.
func openSegmentStore(ctx context.Context, cfg Config, log *slog.Logger) (store.Store, error) {
	c, err := dsn.Parse(cfg.DSN())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dsn.Redact(cfg.DSN()), err)
	}
	actx, cancel := context.WithTimeout(ctx, openAttemptTimeout)
	st, err := dsn.Open(actx, cfg.DSN(), cfg.Migrate)
	cancel()
	if err == nil {
		logEngine(ctx, st, log)
		return st, nil
	}
	if c.Dialect == dsn.SQLite || ctx.Err() != nil || errors.Is(err, store.ErrPermanent) || (cfg.SnowflakeEnabled && cfg.WorkerIDSource == "sql") {
		return nil, fmt.Errorf("open store %s: %w", dsn.Redact(cfg.DSN()), err)
	}
	log.Error("segment database not reachable at start: snowflake mode serves; segment routes answer -1 or -3 and /readyz says why until it answers (then the migrations run); retrying in the background",
		"store", dsn.Redact(cfg.DSN()), "err", err)
	return openLazy(cfg.DSN(), cfg.Migrate, err, log), nil
}

// errStoreNotOpen is returned by every call of a [lazyStore] until the
// database has answered once (and the migrations ran).
var errStoreNotOpen = errors.New("segment database not reachable since start (leaf-server retries in the background)")

// lazyStore is the segment database of a server that started while the
// database did not answer (issue 16 item 10): Leaf starts with an empty
// cache and serves once its refresh succeeds, and so does leaf-server. Until
// the open succeeds every call fails at once with [errStoreNotOpen] wrapping
// the last open error, so segment routes answer -1 or -3 and /readyz says
// why; snowflake mode is not held up. A goroutine retries the open (with the
// migrations) with a backoff of openRetryMin doubling to openRetryMax; once
// it succeeds, onOpen runs (the demo tag, the engine log, a tag refresh) and
// the calls go to the database. Close stops the retries and closes the
// database. Safe for concurrent use.
type lazyStore struct {
	dsn     string
	migrate bool
	log     *slog.Logger

	st atomic.Pointer[store.Store] // nil until the open succeeded

	mu      sync.Mutex // guards lastErr, onOpen
	lastErr error
	onOpen  func(ctx context.Context, st store.Store)

	cancel context.CancelFunc
	done   chan struct{}
}

var _ store.Store = (*lazyStore)(nil)

// openLazy starts retrying to open dsnStr, whose first attempt at start
// failed with firstErr, in a goroutine that Close stops.
func openLazy(dsnStr string, migrate bool, firstErr error, log *slog.Logger) *lazyStore {
	ctx, cancel := context.WithCancel(context.Background())
	l := &lazyStore{dsn: dsnStr, migrate: migrate, log: log, lastErr: firstErr, cancel: cancel, done: make(chan struct{})}
	go l.retry(ctx)
	return l
}

// OnOpen sets f to run once, in the retrying goroutine, right after the
// database opened (or at once, in the caller's goroutine, if it already has).
func (l *lazyStore) OnOpen(f func(ctx context.Context, st store.Store)) {
	l.mu.Lock()
	st := l.st.Load()
	if st == nil {
		l.onOpen = f
	}
	l.mu.Unlock()
	if st != nil {
		f(context.Background(), *st)
	}
}

func (l *lazyStore) retry(ctx context.Context) {
	defer close(l.done)
	wait := openRetryMin
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, openRetryMax)
		actx, cancel := context.WithTimeout(ctx, openAttemptTimeout)
		st, err := dsn.Open(actx, l.dsn, l.migrate)
		cancel()
		if err != nil {
			l.mu.Lock()
			l.lastErr = err
			l.mu.Unlock()
			l.log.Warn("segment database still not reachable; segment routes answer -1 or -3 until it answers",
				"store", dsn.Redact(l.dsn), "err", err, "next_attempt_in", wait)
			continue
		}
		l.mu.Lock()
		l.st.Store(&st)
		f := l.onOpen
		l.mu.Unlock()
		l.log.Info("segment database reachable: opened", "store", dsn.Redact(l.dsn), "migrated", l.migrate)
		if f != nil {
			f(ctx, st)
		}
		return
	}
}

// store returns the open database, or errStoreNotOpen with the last open
// error.
func (l *lazyStore) store() (store.Store, error) {
	if st := l.st.Load(); st != nil {
		return *st, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return nil, fmt.Errorf("%w: %v", errStoreNotOpen, l.lastErr)
}

// Allocate implements [store.Store].
func (l *lazyStore) Allocate(ctx context.Context, tag string, step int64) (store.Allocation, error) {
	st, err := l.store()
	if err != nil {
		return store.Allocation{}, err
	}
	return st.Allocate(ctx, tag, step)
}

// Tags implements [store.Store].
func (l *lazyStore) Tags(ctx context.Context) ([]string, error) {
	st, err := l.store()
	if err != nil {
		return nil, err
	}
	return st.Tags(ctx)
}

// Rows implements [store.Store].
func (l *lazyStore) Rows(ctx context.Context) ([]store.Row, error) {
	st, err := l.store()
	if err != nil {
		return nil, err
	}
	return st.Rows(ctx)
}

// MaxID implements [store.Store].
func (l *lazyStore) MaxID(ctx context.Context, tag string) (int64, error) {
	st, err := l.store()
	if err != nil {
		return 0, err
	}
	return st.MaxID(ctx, tag)
}

// ReturnTail implements [store.Store].
func (l *lazyStore) ReturnTail(ctx context.Context, tag string, from, to, seq int64) (bool, error) {
	st, err := l.store()
	if err != nil {
		return false, err
	}
	return st.ReturnTail(ctx, tag, from, to, seq)
}

// TailReturns implements [store.Store].
func (l *lazyStore) TailReturns(ctx context.Context) ([]store.TailReturn, error) {
	st, err := l.store()
	if err != nil {
		return nil, err
	}
	return st.TailReturns(ctx)
}

// TailReturnOf implements [store.Store].
func (l *lazyStore) TailReturnOf(ctx context.Context, tag string) (store.TailReturn, error) {
	st, err := l.store()
	if err != nil {
		return store.TailReturn{}, err
	}
	return st.TailReturnOf(ctx, tag)
}

// Create implements [store.Store].
func (l *lazyStore) Create(ctx context.Context, r store.Row) error {
	st, err := l.store()
	if err != nil {
		return err
	}
	return st.Create(ctx, r)
}

// ForceCreate implements [store.Store].
func (l *lazyStore) ForceCreate(ctx context.Context, r store.Row) (int64, error) {
	st, err := l.store()
	if err != nil {
		return 0, err
	}
	return st.ForceCreate(ctx, r)
}

// Update implements [store.Store].
func (l *lazyStore) Update(ctx context.Context, tag string, step int64, description string) error {
	st, err := l.store()
	if err != nil {
		return err
	}
	return st.Update(ctx, tag, step, description)
}

// Fence implements [store.Store].
func (l *lazyStore) Fence(ctx context.Context, tag string, minMaxID int64) (store.Row, error) {
	st, err := l.store()
	if err != nil {
		return store.Row{}, err
	}
	return st.Fence(ctx, tag, minMaxID)
}

// Delete implements [store.Store].
func (l *lazyStore) Delete(ctx context.Context, tag string) error {
	st, err := l.store()
	if err != nil {
		return err
	}
	return st.Delete(ctx, tag)
}

// Ping implements [store.Store].
func (l *lazyStore) Ping(ctx context.Context) error {
	st, err := l.store()
	if err != nil {
		return err
	}
	return st.Ping(ctx)
}

// Close stops the retries, waits for an attempt in flight, and closes the
// database if it was opened.
func (l *lazyStore) Close() error {
	l.cancel()
	<-l.done
	if st := l.st.Load(); st != nil {
		return (*st).Close()
	}
	return nil
}

// boundStore bounds every call on the wrapped store by timeout: the store of
// the HTTP routes (/db, the admin API, /readyz), so that no route waits
// longer than --wait-timeout for a database that does not answer (issue 16
// item 7). A call past the bound returns context.DeadlineExceeded wrapped by
// the driver. The segment generator gets the store unbounded: its loads have
// their own timeout and callers wait for them at most --wait-timeout.
type boundStore struct {
	store.Store
	timeout time.Duration
}

func (b boundStore) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

// Allocate implements [store.Store] within the bound.
func (b boundStore) Allocate(ctx context.Context, tag string, step int64) (store.Allocation, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.Allocate(ctx, tag, step)
}

// Tags implements [store.Store] within the bound.
func (b boundStore) Tags(ctx context.Context) ([]string, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.Tags(ctx)
}

// Rows implements [store.Store] within the bound.
func (b boundStore) Rows(ctx context.Context) ([]store.Row, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.Rows(ctx)
}

// MaxID implements [store.Store] within the bound.
func (b boundStore) MaxID(ctx context.Context, tag string) (int64, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.MaxID(ctx, tag)
}

// Create implements [store.Store] within the bound.
func (b boundStore) Create(ctx context.Context, r store.Row) error {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.Create(ctx, r)
}

// ForceCreate implements [store.Store] within the bound.
func (b boundStore) ForceCreate(ctx context.Context, r store.Row) (int64, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.ForceCreate(ctx, r)
}

// Update implements [store.Store] within the bound.
func (b boundStore) Update(ctx context.Context, tag string, step int64, description string) error {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.Update(ctx, tag, step, description)
}

// Fence implements [store.Store] within the bound.
func (b boundStore) Fence(ctx context.Context, tag string, minMaxID int64) (store.Row, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.Fence(ctx, tag, minMaxID)
}

// Delete implements [store.Store] within the bound.
func (b boundStore) Delete(ctx context.Context, tag string) error {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.Delete(ctx, tag)
}

// Ping implements [store.Store] within the bound.
func (b boundStore) Ping(ctx context.Context) error {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.Ping(ctx)
}
