// Package sqllease is the `sql` worker ID source of docs/contract.md §3.6: a snowflake worker
// ID leased from a table (leaf_worker_lease) in the same database as the segments, through
// the small Store interface that store/postgres, store/mysql and store/sqlite implement. It
// imports no driver. Its Lease is a snowflake.Source.
//
// Start claims the lowest free worker ID of its range; the claim bumps the row's generation,
// the fencing token, and its UPDATE re-checks that the row is still expired with the
// generation it read, so concurrent claimers get different IDs even where the database's
// SKIP LOCKED does not lock (TiDB). A goroutine owned by the Lease renews it every Renew (3 s)
// for TTL (10 s) of database time. A lease alone does not keep IDs unique: a holder that
// pauses (a long GC, a stopped VM, a cut network) can wake up after the database has handed
// its worker ID to another node, still believing it holds it, and its clock may differ from
// the new holder's. So two rules keep IDs unique across holders: the holder stops on its own
// before the database can hand the worker ID on, and what must survive a change of holder
// lives in the row, written only under the holder's generation:
//
//  1. Stop issuing before the database may hand the ID to someone else. Expiry is the local
//     monotonic instant taken just before the last successful renewal was sent, plus TTL
//     minus Margin. The database computed its expiry later (when the statement ran) from its
//     own clock, so the local expiry comes first as long as the two clocks' rates differ by
//     less than Margin/TTL; a slow answer shortens the local lease and never lengthens it.
//     snowflake.Generator refuses with ErrLeaseExpired from Expiry on, and resumes after the
//     next successful renewal. The monotonic clock stops while the host is suspended, so
//     Expiry also checks the same instant on the wall clock (whichever passes first ends
//     the lease).
//  2. Keep the time high-water mark in the row (Lease implements snowflake.HighWater): the
//     generator stores a mark ahead of its clock (persisted at once with a fenced renewal)
//     before it issues IDs up to it, and a new holder of the same worker ID loads the row's
//     mark and issues nothing below it. So even a paused old holder and a new holder with a
//     skewed clock cannot produce the same ID.
//
// A renewal that finds another generation in the row means the lease was lost: the Lease
// never renews again, Expiry stays in the past and Lost() is closed. The process must start a
// new Lease (and a new Generator with its worker ID) to issue snowflake IDs again.
package sqllease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/store"
)

// Defaults used by Start for zero Options fields (docs/contract.md §3.6: TTL 10 s, renew every
// 3 s).
const (
	// DefaultTTL is the lease time granted by each claim and renewal, in database time.
	DefaultTTL = 10 * time.Second
	// DefaultRenew is the interval between renewals.
	DefaultRenew = 3 * time.Second
	// DefaultMargin is how much earlier than the database the Lease gives up the worker ID:
	// it covers clock-rate differences and the time a pause takes to be noticed.
	DefaultMargin = 2 * time.Second
	// DefaultClaimSlack is what Options.ClaimWait adds to TTL by default: a start that finds
	// every worker ID of its range leased waits TTL + 2 s, long enough for the lease of a
	// holder that crashed just before to run out (as the etcd source waits).
	DefaultClaimSlack = 2 * time.Second
	// DefaultMaxMarkAhead is Options.MaxMarkAhead's default: 1 minute, twenty times the
	// generator's 3 s high-water window, so a normal restart keeps its worker ID and only a
	// mark left by a clock that ran far ahead is skipped.
	DefaultMaxMarkAhead = time.Minute
)

var (
	// ErrOptions is returned by Start for Options outside their documented ranges.
	ErrOptions = errors.New("sqllease: invalid options")
	// ErrLost is returned by Store (snowflake.HighWater) once a renewal found that the worker
	// ID has another generation in the database (the error then also matches
	// store.ErrLeaseLost). It is final: the Lease never renews again; start a new one.
	ErrLost = errors.New("sqllease: worker ID lease lost to another node; start a new lease")
	// ErrClosed is returned by Store (snowflake.HighWater) after Close.
	ErrClosed = errors.New("sqllease: lease closed")
)

// Store is what a Lease needs from the database; *postgres.Store, *mysql.Store and
// *sqlite.Store implement it (store.LeaseStore documents the contract). All instants it uses
// come from the database's clock.
type Store interface {
	// ClaimWorker claims the lowest free worker ID in c.MinWorker..c.MaxWorker for c.TTL and
	// bumps its generation; concurrent claimers get different IDs. Errors:
	// store.ErrNoFreeWorker, store.ErrClaimContended, store.ErrBadLease, driver errors.
	ClaimWorker(ctx context.Context, c store.Claim) (store.Lease, error)
	// RenewWorker extends the lease by ttl from the database's now, raises the row's
	// high-water mark to highWaterMillis and records the holder's clock clockMillis, only
	// while generation matches. Errors: store.ErrLeaseLost, driver errors.
	RenewWorker(ctx context.Context, workerID, generation int64, ttl time.Duration, highWaterMillis, clockMillis int64) (store.Lease, error)
	// ReleaseWorker frees the worker ID at once while generation matches. Errors:
	// store.ErrLeaseLost, driver errors.
	ReleaseWorker(ctx context.Context, workerID, generation, finalMarkMillis int64) error
	// LiveHolders lists the unexpired leases with the clocks their holders last reported,
	// and the database's now.
	LiveHolders(ctx context.Context) ([]store.Holder, time.Time, error)
}

// Clock is the local time source. Pass the same clock as snowflake.Settings.Clock: the
// generator compares its Now with Expiry. With snowflake.SystemClock, the times carry Go's
// monotonic reading, so Expiry is immune to wall-clock steps. The renewal schedule uses real
// timers whatever the Clock.
type Clock interface {
	Now() time.Time
}

// Range is an inclusive range of worker IDs, Min..Max.
type Range struct {
	Min, Max int64
}

// Options configure Start. The zero value means the defaults.
type Options struct {
	// Owner is written into the row's owner column for operators (e.g. "host:port"), at most
	// 255 bytes; it plays no part in fencing. "" means "<hostname>:<pid>".
	Owner string
	// TTL is the lease time each claim and renewal grants, measured by the database,
	// store.MinLeaseTTL..store.MaxLeaseTTL; 0 means DefaultTTL. A crashed holder's worker ID
	// is free again TTL after its last renewal.
	TTL time.Duration
	// Renew is the interval between renewals, > 0 and < TTL - Margin; 0 means DefaultRenew.
	// After a failed renewal the next attempt comes after Renew/2. Each attempt is given at
	// most Renew to answer.
	Renew time.Duration
	// Margin is how much earlier than TTL the Lease stops the generator, > 0 and < TTL; 0
	// means DefaultMargin.
	Margin time.Duration
	// Layout is the snowflake layout the worker ID is for: IDs 0..Layout.MaxWorker() are
	// claimed (at most store.MaxLeaseWorker). The zero Layout means snowflake.DefaultLayout()
	// (0..1023).
	Layout snowflake.Layout
	// Workers, when set, limits the claimed worker IDs to Workers.Min..Workers.Max, which
	// must lie within 0..Layout.MaxWorker() (ErrOptions otherwise): leaf-server's
	// --worker-id-min/--worker-id-max, so that clusters or regions that share a layout but
	// not a lease database get disjoint IDs (Ahoo-Wang/CosId#773). nil means the whole layout.
	Workers *Range
	// MaxPeerClockSkew, when > 0, makes Start compare the local wall clock with the clocks
	// the live holders of other worker IDs reported with their last renewal, and refuse
	// (snowflake.ErrPeerClockSkew, naming every peer and its offset) when it is off their
	// mean by more than this: Twitter snowflake's start check, leaf-server's
	// --max-peer-clock-skew (default 10 s). 0 turns the check off.
	MaxPeerClockSkew time.Duration
	// ClaimWait is how long Start keeps claiming while every worker ID of the range is
	// leased: a holder that crashed (or was killed) stops renewing, and its worker ID is free
	// once its lease runs out, at most TTL later; Start then claims it (never before: the
	// database grants only expired rows). 0 means TTL + DefaultClaimSlack; negative means
	// fail at once. Claims are retried every TTL/10 (20 ms..1 s). After ClaimWait Start
	// fails with store.ErrNoFreeWorker naming every holder (worker ID, owner, expiry).
	ClaimWait time.Duration
	// MaxMarkAhead is how far the claimed row's time high-water mark may lie ahead of the
	// local clock before Start gives the worker ID back and claims another one instead of
	// waiting for the clock to reach it (a clock that once jumped a day ahead would lock the
	// worker ID out for that day). 0 means DefaultMaxMarkAhead; negative means never skip.
	// When no other worker ID is free, Start keeps the one with the lowest mark.
	MaxMarkAhead time.Duration
	// Clock is the local clock; nil means snowflake.SystemClock{}.
	Clock Clock
	// WallClock reads the wall clock that Expiry checks besides Clock: Go's monotonic
	// clock (what Clock's readings compare by) stops while the host is suspended, the wall
	// clock does not, so a lease that lapsed during a suspension is seen as lapsed at
	// resume. nil means Clock's readings stripped of their monotonic part.
	WallClock func() time.Time
	// Logger receives claim, renewal failure, loss and release events; nil discards them.
	Logger *slog.Logger
}

// Lease is a claimed worker ID, renewed in the background until Close or until it is lost.
// It is the "sql" snowflake.Source (and so a snowflake.Lease and a snowflake.HighWater): pass
// it as snowflake.Settings.Source. Safe for concurrent use.
type Lease struct {
	st         Store
	owner      string
	ttl        time.Duration
	renew      time.Duration
	margin     time.Duration
	clock      Clock
	wall       func() time.Time
	log        *slog.Logger
	workerID   int64
	generation int64
	// floorMillis is the row's high_water_ms at claim, Unix ms.
	floorMillis int64

	// expiry is what Expiry returns; it points at the zero time once lost or closed (Expiry
	// then returns expiredAt).
	expiry atomic.Pointer[time.Time]
	// wallExpiry is expiry's wall-clock twin (no monotonic reading), Unix ns: Expiry also
	// fails once the wall clock has passed it.
	wallExpiry atomic.Int64
	// lost is closed when a renewal found another generation.
	lost     chan struct{}
	lostOnce sync.Once

	cancel    context.CancelFunc
	done      chan struct{} // closed when the renewal goroutine has returned
	closeOnce sync.Once
	closeErr  error

	// callMu serialises the calls on the row (renewals from the goroutine and from Store,
	// the release in Close) so that expiry only moves forward and nothing renews after a
	// loss or a release. It is held across database calls; mu is not.
	callMu sync.Mutex

	mu sync.Mutex // guards the fields below
	// markMillis is the highest high-water mark the row is known to hold, Unix ms.
	markMillis int64
	// lastRenewal is the local instant before the last successful claim or renewal was sent.
	lastRenewal time.Time
	// dbExpires is the row's expires_at after it, database clock.
	dbExpires time.Time
	// renewals, failures and consecutive count successful renewals, failed ones, and failed
	// ones since the last success.
	renewals, failures, consecutive int64
	// lastErr is the last renewal failure.
	lastErr error
	// isLost and closed mirror the lost channel and Close.
	isLost, closed bool
	// finalMark is the mark StoreFinal gave (Unix ms; 0: none), written by Close's release.
	finalMark int64
}

var _ snowflake.Source = (*Lease)(nil)

// expiredAt is what Expiry returns once the lease is lost or closed: an instant long past, and
// not the zero time, which means "never expires" to snowflake.Lease.
var expiredAt = time.Unix(0, 0).UTC()

// Start claims the lowest free worker ID of opts.Workers (or of opts.Layout) in st and starts
// renewing it. First, with opts.MaxPeerClockSkew set, it checks the local clock against the
// live holders' (see Options.MaxPeerClockSkew). A claimed worker ID whose stored high-water
// mark lies more than opts.MaxMarkAhead ahead of the clock is given back for another free
// one (logged). With every worker ID of the range leased, Start retries for up to
// opts.ClaimWait (TTL + 2 s by default: a crashed holder's lease runs out within TTL) and
// logs once that it waits. ctx bounds the claim only; the renewals run until Close. Errors:
// ErrOptions, snowflake.ErrPeerClockSkew, or the claim's error (store.ErrNoFreeWorker after
// ClaimWait, naming the holders with their expiry; a driver error).
func Start(ctx context.Context, st Store, opts Options) (*Lease, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if err := checkPeers(ctx, st, opts); err != nil {
		return nil, err
	}
	sent, cl, err := claim(ctx, st, opts)
	if err != nil {
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	l := &Lease{
		st:          st,
		owner:       opts.Owner,
		ttl:         opts.TTL,
		renew:       opts.Renew,
		margin:      opts.Margin,
		clock:       opts.Clock,
		wall:        opts.WallClock,
		log:         opts.Logger.With("worker_id", cl.WorkerID, "generation", cl.Generation),
		workerID:    cl.WorkerID,
		generation:  cl.Generation,
		floorMillis: cl.HighWaterMillis,
		lost:        make(chan struct{}),
		cancel:      cancel,
		done:        make(chan struct{}),
		markMillis:  cl.HighWaterMillis,
		lastRenewal: sent,
		dbExpires:   cl.ExpiresAt,
	}
	l.extend(sent)
	l.log.Info("claimed snowflake worker ID", "owner", l.owner, "ttl", l.ttl,
		"range", fmt.Sprintf("%d..%d", opts.Workers.Min, opts.Workers.Max),
		"db_expires", cl.ExpiresAt, "high_water_ms", cl.HighWaterMillis)
	go l.run(loopCtx)
	return l, nil
}

// extend moves the local expiry to sent + TTL - Margin (on Clock, and on the wall clock from
// sent's wall reading) unless it is already later. Called with callMu held, or before run.
func (l *Lease) extend(sent time.Time) {
	exp := sent.Add(l.ttl - l.margin)
	if cur := l.expiry.Load(); cur != nil && !exp.After(*cur) {
		return
	}
	l.wallExpiry.Store(sent.Round(0).Add(l.ttl - l.margin).UnixNano())
	l.expiry.Store(&exp)
}

// fill applies the defaults and validates.
func (o *Options) fill() error {
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	if len(o.Owner) > 255 {
		return fmt.Errorf("%w: owner is %d bytes, at most 255", ErrOptions, len(o.Owner))
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Renew == 0 {
		o.Renew = DefaultRenew
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	if o.Clock == nil {
		o.Clock = snowflake.SystemClock{}
	}
	if o.WallClock == nil {
		clock := o.Clock
		o.WallClock = func() time.Time { return clock.Now().Round(0) }
	}
	if o.MaxMarkAhead == 0 {
		o.MaxMarkAhead = DefaultMaxMarkAhead
	}
	if o.ClaimWait == 0 {
		o.ClaimWait = o.TTL + DefaultClaimSlack
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Layout == (snowflake.Layout{}) {
		o.Layout = snowflake.DefaultLayout()
	}
	switch {
	case o.TTL < store.MinLeaseTTL || o.TTL > store.MaxLeaseTTL:
		return fmt.Errorf("%w: TTL %v not in [%v, %v]", ErrOptions, o.TTL, store.MinLeaseTTL, store.MaxLeaseTTL)
	case o.Margin <= 0 || o.Margin >= o.TTL:
		return fmt.Errorf("%w: margin %v not in (0, TTL %v)", ErrOptions, o.Margin, o.TTL)
	case o.Renew <= 0 || o.Renew >= o.TTL-o.Margin:
		return fmt.Errorf("%w: renew interval %v not in (0, TTL - margin = %v): the lease would lapse between renewals",
			ErrOptions, o.Renew, o.TTL-o.Margin)
	}
	if err := o.Layout.Validate(o.Clock.Now()); err != nil {
		return fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if o.Workers == nil {
		if o.Layout.MaxWorker() > store.MaxLeaseWorker {
			return fmt.Errorf("%w: %d worker bits give IDs up to %d, the lease table takes at most %d; set a range",
				ErrOptions, o.Layout.WorkerBits, o.Layout.MaxWorker(), store.MaxLeaseWorker)
		}
		o.Workers = &Range{Min: 0, Max: o.Layout.MaxWorker()}
	}
	r := *o.Workers
	o.Workers = &r
	switch {
	case r.Min < 0 || r.Min > r.Max || r.Max > o.Layout.MaxWorker():
		return fmt.Errorf("%w: worker ID range %d..%d not within the layout's 0..%d (%d worker bits)",
			ErrOptions, r.Min, r.Max, o.Layout.MaxWorker(), o.Layout.WorkerBits)
	case r.Max > store.MaxLeaseWorker:
		return fmt.Errorf("%w: worker ID range %d..%d: the lease table takes IDs up to %d", ErrOptions, r.Min, r.Max, store.MaxLeaseWorker)
	case o.MaxPeerClockSkew < 0:
		return fmt.Errorf("%w: max peer clock skew %v is negative (0 turns the check off)", ErrOptions, o.MaxPeerClockSkew)
	}
	return nil
}

// WorkerID returns the leased worker ID, 0..Layout.MaxWorker(). It never changes: after a
// loss, a new Lease may get another one.
func (l *Lease) WorkerID() int64 { return l.workerID }

// Generation returns the generation (fencing token) of this claim: the row's claim count, so
// a later holder of the same worker ID always has a larger one.
func (l *Lease) Generation() int64 { return l.generation }

// Expiry implements snowflake.Lease: the local instant from which the worker ID may belong to
// another node, lastRenewal + TTL - Margin, where lastRenewal is the local clock read before
// the last successful claim or renewal was sent. Once the lease is lost or closed it returns
// 1970-01-01T00:00:00Z (long past). One atomic load; the generator calls it on every Next.
//
// It also reads the wall clock (Options.WallClock): once that has passed the wall-clock twin
// of the expiry, Expiry returns 1970 too, until the next successful renewal. Go's monotonic
// clock does not advance while the host is suspended, so without this a holder resumed after
// its lease lapsed in the database would go on issuing; a wall clock stepped forward past the
// expiry stops the generator until the next renewal, which is safe.
func (l *Lease) Expiry() time.Time {
	exp := *l.expiry.Load()
	if exp.IsZero() || l.wall().UnixNano() >= l.wallExpiry.Load() {
		return expiredAt
	}
	return exp
}

// Lost returns a channel that is closed when a renewal finds the worker ID held by another
// generation. The Lease is then dead for good: Expiry stays in the past and the generator
// refuses; the caller should log, report not-ready, and start a new Lease and Generator (or
// exit and let the supervisor restart the process).
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Load implements snowflake.HighWater: the row's high_water_ms when the worker ID was claimed,
// the zero time if none was ever stored. Earlier holders of the worker ID issued nothing at
// or past it. It does no I/O.
func (l *Lease) Load(ctx context.Context) (time.Time, error) {
	if l.floorMillis <= 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(l.floorMillis), nil
}

// Store implements snowflake.HighWater: it persists mark (Unix ms) in the row at once, with a
// renewal fenced by the generation (which also extends the lease), and returns nil only once
// the database has it. A mark at or below the row's is a no-op. Errors: ErrLost (final),
// ErrClosed, or the renewal's error (the generator then issues nothing past its previous
// mark).
func (l *Lease) Store(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	l.mu.Lock()
	stored := l.markMillis
	l.mu.Unlock()
	if ms <= stored {
		return nil
	}
	return l.renewOnce(ctx, ms)
}

// renewOnce renews the lease, raising the row's mark to at least markMillis.
func (l *Lease) renewOnce(ctx context.Context, markMillis int64) error {
	l.callMu.Lock()
	defer l.callMu.Unlock()
	l.mu.Lock()
	lost, closed := l.isLost, l.closed
	markMillis = max(markMillis, l.markMillis)
	l.mu.Unlock()
	switch {
	case lost:
		return ErrLost
	case closed:
		return ErrClosed
	}
	sent := l.clock.Now()
	got, err := l.st.RenewWorker(ctx, l.workerID, l.generation, l.ttl, markMillis, clockMillis(sent))
	if errors.Is(err, store.ErrLeaseLost) {
		l.markLost(err)
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failures++
		l.consecutive++
		l.lastErr = err
		return fmt.Errorf("sqllease: renew worker ID %d: %w", l.workerID, err)
	}
	l.renewals++
	l.consecutive = 0
	l.lastRenewal = sent
	l.dbExpires = got.ExpiresAt
	l.markMillis = max(l.markMillis, got.HighWaterMillis)
	l.extend(sent)
	return nil
}

// markLost makes the loss final. Called with callMu held.
func (l *Lease) markLost(err error) {
	l.expiry.Store(&time.Time{})
	l.mu.Lock()
	l.isLost = true
	l.lastErr = err
	l.mu.Unlock()
	l.lostOnce.Do(func() { close(l.lost) })
	l.log.Error("snowflake worker ID lease lost: another node holds the worker ID now; "+
		"no more IDs from this lease, start a new one", "err", err)
}

// run renews every Renew (Renew/2 after a failure) until ctx is cancelled or the lease is
// lost.
func (l *Lease) run(ctx context.Context) {
	defer close(l.done)
	timer := time.NewTimer(l.renew)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		began := time.Now()
		callCtx, cancel := context.WithTimeout(ctx, l.renew)
		err := l.renewOnce(callCtx, 0)
		cancel()
		interval := l.renew
		switch {
		case err == nil:
		case errors.Is(err, ErrLost), errors.Is(err, ErrClosed), ctx.Err() != nil:
			return
		default:
			interval = l.renew / 2
			st := l.State()
			l.log.Warn("snowflake worker ID lease renewal failed",
				"err", err, "consecutive_failures", st.ConsecutiveFailures,
				"expires_in", st.Expires.Sub(l.clock.Now()))
		}
		timer.Reset(max(interval-time.Since(began), 0))
	}
}

// Close stops the renewals, waits for the goroutine, makes Expiry the zero time (so the
// generator refuses from now on) and releases the worker ID in the database unless the lease
// was lost. ctx bounds the release. It returns the release's error (nil when lost); later
// calls return the first call's result. A Generator using the Lease must not be used
// afterwards (it would refuse anyway).
func (l *Lease) Close(ctx context.Context) error {
	l.closeOnce.Do(func() {
		l.cancel()
		<-l.done
		l.callMu.Lock()
		defer l.callMu.Unlock()
		l.expiry.Store(&time.Time{})
		l.mu.Lock()
		l.closed = true
		lost := l.isLost
		l.mu.Unlock()
		if lost {
			return
		}
		l.mu.Lock()
		final := l.finalMark
		l.mu.Unlock()
		err := l.st.ReleaseWorker(ctx, l.workerID, l.generation, final)
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			l.log.Warn("snowflake worker ID was already taken over at release", "err", err)
		case err != nil:
			// The row expires by itself TTL after the last renewal.
			l.closeErr = fmt.Errorf("sqllease: release worker ID %d: %w", l.workerID, err)
		default:
			l.log.Info("released snowflake worker ID")
		}
	})
	return l.closeErr
}

// State is a snapshot of a Lease for the status API (GET /api/v1/snowflake/status).
type State struct {
	// WorkerID and Generation identify the claim (Generation is the fencing token).
	WorkerID, Generation int64
	// Owner is the owner string written into the row.
	Owner string
	// TTL, Renew and Margin are the effective options.
	TTL, Renew, Margin time.Duration
	// Expires is Expiry(): local clock; the zero time when lost or closed.
	Expires time.Time
	// LastRenewal is the local instant before the last successful claim or renewal was sent.
	LastRenewal time.Time
	// DBExpires is the row's expires_at after the last success, database clock (UTC).
	DBExpires time.Time
	// HighWater is the highest time high-water mark the row is known to hold; the zero time
	// when none.
	HighWater time.Time
	// Renewals counts successful renewals (including those made by Store); RenewFailures
	// failed ones; ConsecutiveFailures those since the last success.
	Renewals, RenewFailures, ConsecutiveFailures int64
	// LastError is the last renewal failure's message, "" when none.
	LastError string
	// Lost reports that another generation took the worker ID (final).
	Lost bool
	// Closed reports that Close was called.
	Closed bool
}

// State returns a snapshot; it never waits for the database.
func (l *Lease) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := State{
		WorkerID:            l.workerID,
		Generation:          l.generation,
		Owner:               l.owner,
		TTL:                 l.ttl,
		Renew:               l.renew,
		Margin:              l.margin,
		Expires:             *l.expiry.Load(),
		LastRenewal:         l.lastRenewal,
		DBExpires:           l.dbExpires,
		Renewals:            l.renewals,
		RenewFailures:       l.failures,
		ConsecutiveFailures: l.consecutive,
		Lost:                l.isLost,
		Closed:              l.closed,
	}
	if l.markMillis > 0 {
		s.HighWater = time.UnixMilli(l.markMillis).UTC()
	}
	if l.lastErr != nil {
		s.LastError = l.lastErr.Error()
	}
	return s
}
