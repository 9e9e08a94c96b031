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
// keeps trying, as both results (lazy is nil when the database answered). It returns an error for a malformed DSN, for SQLite (a local
// file: nothing to wait for), for [store.ErrPermanent] (the database does
// not exist or refused the credentials: waiting does not help), and when snowflake mode takes its worker ID
// from the database (--worker-id-source sql), which cannot start without it.
func openSegmentStore(ctx context.Context, cfg Config, log *slog.Logger) (st store.Store, lazy *lazyStore, err error) {
	c, err := dsn.Parse(cfg.DSN())
	if err != nil {
		return nil, nil, fmt.Errorf("open store %s: %w", dsn.Redact(cfg.DSN()), err)
	}
	actx, cancel := context.WithTimeout(ctx, openAttemptTimeout)
	st, err = dsn.Open(actx, cfg.DSN(), cfg.Migrate)
	cancel()
	if err == nil {
		logEngine(ctx, st, log)
		return st, nil, nil
	}
	if c.Dialect == dsn.SQLite || ctx.Err() != nil || errors.Is(err, store.ErrPermanent) || (cfg.SnowflakeEnabled && cfg.WorkerIDSource == "sql") {
		return nil, nil, fmt.Errorf("open store %s: %w", dsn.Redact(cfg.DSN()), err)
	}
	log.Error("segment database not reachable at start: snowflake mode serves; segment routes answer -1 or -3 and /readyz says why until it answers (then the migrations run); retrying in the background",
		"store", dsn.Redact(cfg.DSN()), "err", err)
	lazy = openLazy(cfg.DSN(), cfg.Migrate, err, log)
	return lazy, lazy, nil
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

// The methods below pass each call of [store.Store] to the open database,
// or fail with [errStoreNotOpen] before it opened. lazyStore implements the
// whole interface (the assertion above), so a method added to store.Store
// is a compile error here until it is passed on too.

// lazyCall runs f on the open database, or returns errStoreNotOpen.
func lazyCall[T any](l *lazyStore, f func(st store.Store) (T, error)) (T, error) {
	st, err := l.store()
	if err != nil {
		var zero T
		return zero, err
	}
	return f(st)
}

// lazyDo is lazyCall for a call that returns only an error.
func lazyDo(l *lazyStore, f func(st store.Store) error) error {
	st, err := l.store()
	if err != nil {
		return err
	}
	return f(st)
}

// Allocate implements [store.Store].
func (l *lazyStore) Allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, error) {
	return lazyCall(l, func(st store.Store) (store.Allocation, error) { return st.Allocate(ctx, tag, step, mark) })
}

// Tags implements [store.Store].
func (l *lazyStore) Tags(ctx context.Context) ([]string, error) {
	return lazyCall(l, func(st store.Store) ([]string, error) { return st.Tags(ctx) })
}

// Rows implements [store.Store].
func (l *lazyStore) Rows(ctx context.Context) ([]store.Row, error) {
	return lazyCall(l, func(st store.Store) ([]store.Row, error) { return st.Rows(ctx) })
}

// FindTags implements [store.Store].
func (l *lazyStore) FindTags(ctx context.Context, tags []string) (map[string]bool, error) {
	return lazyCall(l, func(st store.Store) (map[string]bool, error) { return st.FindTags(ctx, tags) })
}

// MaxID implements [store.Store].
func (l *lazyStore) MaxID(ctx context.Context, tag string) (int64, error) {
	return lazyCall(l, func(st store.Store) (int64, error) { return st.MaxID(ctx, tag) })
}

// Create implements [store.Store].
func (l *lazyStore) Create(ctx context.Context, r store.Row) error {
	return lazyDo(l, func(st store.Store) error { return st.Create(ctx, r) })
}

// ForceCreate implements [store.Store].
func (l *lazyStore) ForceCreate(ctx context.Context, r store.Row) (int64, error) {
	return lazyCall(l, func(st store.Store) (int64, error) { return st.ForceCreate(ctx, r) })
}

// Update implements [store.Store].
func (l *lazyStore) Update(ctx context.Context, tag string, step int64, description string) error {
	return lazyDo(l, func(st store.Store) error { return st.Update(ctx, tag, step, description) })
}

// Fence implements [store.Store].
func (l *lazyStore) Fence(ctx context.Context, tag string, minMaxID int64) (store.Row, error) {
	return lazyCall(l, func(st store.Store) (store.Row, error) { return st.Fence(ctx, tag, minMaxID) })
}

// ReturnTail implements [store.Store].
func (l *lazyStore) ReturnTail(ctx context.Context, tag string, from, to, seq int64) (bool, error) {
	return lazyCall(l, func(st store.Store) (bool, error) { return st.ReturnTail(ctx, tag, from, to, seq) })
}

// TailReturns implements [store.Store].
func (l *lazyStore) TailReturns(ctx context.Context) ([]store.TailReturn, error) {
	return lazyCall(l, func(st store.Store) ([]store.TailReturn, error) { return st.TailReturns(ctx) })
}

// TailReturnOf implements [store.Store].
func (l *lazyStore) TailReturnOf(ctx context.Context, tag string) (store.TailReturn, error) {
	return lazyCall(l, func(st store.Store) (store.TailReturn, error) { return st.TailReturnOf(ctx, tag) })
}

// Delete implements [store.Store].
func (l *lazyStore) Delete(ctx context.Context, tag string) error {
	return lazyDo(l, func(st store.Store) error { return st.Delete(ctx, tag) })
}

// Groups implements [store.Store].
func (l *lazyStore) Groups(ctx context.Context) ([]store.Group, error) {
	return lazyCall(l, func(st store.Store) ([]store.Group, error) { return st.Groups(ctx) })
}

// FindGroups implements [store.Store].
func (l *lazyStore) FindGroups(ctx context.Context, tags []string) ([]store.Group, error) {
	return lazyCall(l, func(st store.Store) ([]store.Group, error) { return st.FindGroups(ctx, tags) })
}

// Now implements [store.Store].
func (l *lazyStore) Now(ctx context.Context) (time.Time, error) {
	return lazyCall(l, func(st store.Store) (time.Time, error) { return st.Now(ctx) })
}

// CreateGroup implements [store.Store].
func (l *lazyStore) CreateGroup(ctx context.Context, g store.Group) error {
	return lazyDo(l, func(st store.Store) error { return st.CreateGroup(ctx, g) })
}

// UpdateGroup implements [store.Store].
func (l *lazyStore) UpdateGroup(ctx context.Context, g store.Group) error {
	return lazyDo(l, func(st store.Store) error { return st.UpdateGroup(ctx, g) })
}

// RaisePrunedBefore implements [store.Store].
func (l *lazyStore) RaisePrunedBefore(ctx context.Context, tag, key string) (string, error) {
	return lazyCall(l, func(st store.Store) (string, error) { return st.RaisePrunedBefore(ctx, tag, key) })
}

// DeleteGroup implements [store.Store].
func (l *lazyStore) DeleteGroup(ctx context.Context, tag string) error {
	return lazyDo(l, func(st store.Store) error { return st.DeleteGroup(ctx, tag) })
}

// ClaimWorker implements [store.LeaseStore]. (--worker-id-source sql
// never gets a lazyStore: it cannot start without its database.)
func (l *lazyStore) ClaimWorker(ctx context.Context, c store.Claim) (store.Lease, error) {
	return lazyCall(l, func(st store.Store) (store.Lease, error) { return st.ClaimWorker(ctx, c) })
}

// RenewWorker implements [store.LeaseStore].
func (l *lazyStore) RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis, clockMillis int64) (store.Lease, error) {
	return lazyCall(l, func(st store.Store) (store.Lease, error) {
		return st.RenewWorker(ctx, workerID, generation, ttl, highWaterMillis, clockMillis)
	})
}

// ReleaseWorker implements [store.LeaseStore].
func (l *lazyStore) ReleaseWorker(ctx context.Context, workerID, generation, finalMarkMillis int64) error {
	return lazyDo(l, func(st store.Store) error { return st.ReleaseWorker(ctx, workerID, generation, finalMarkMillis) })
}

// LiveHolders implements [store.LeaseStore].
func (l *lazyStore) LiveHolders(ctx context.Context) ([]store.Holder, time.Time, error) {
	st, err := l.store()
	if err != nil {
		return nil, time.Time{}, err
	}
	return st.LiveHolders(ctx)
}

// Engine implements [store.Store].
func (l *lazyStore) Engine(ctx context.Context) (store.Engine, error) {
	return lazyCall(l, func(st store.Store) (store.Engine, error) { return st.Engine(ctx) })
}

// RetryCounts implements [store.Store]: the open database's, nil before it
// opened.
func (l *lazyStore) RetryCounts() map[string]uint64 {
	if st := l.st.Load(); st != nil {
		return (*st).RetryCounts()
	}
	return nil
}

// Ping implements [store.Store].
func (l *lazyStore) Ping(ctx context.Context) error {
	return lazyDo(l, func(st store.Store) error { return st.Ping(ctx) })
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
