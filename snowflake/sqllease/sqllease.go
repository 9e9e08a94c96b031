// Package sqllease is the `sql` worker ID source of docs/contract.md §3.6: a snowflake worker
// ID leased from a table (leaf_worker_lease) in the same database as the segments, through
// the small Store interface that store/postgres, store/mysql and store/sqlite implement. It
// imports no driver. Its Lease is a snowflake.Source.
//
// Claim claims the lowest free worker ID of its range; the claim bumps the row's generation,
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
// Both rules are the shared lease policy of package lease (snowflake/lease): the Lease's
// lease.Session holds the expiry, the renewal loop and the loss; this package keeps only the
// database's calls. A claim that finds no history (the row's first generation, no mark: a
// fresh table, or one emptied by a restore or a mistaken DELETE) is held back for TTL +
// Margin before it serves, so that a holder whose row vanished has stopped by then.
//
// A renewal that finds another generation, no row, or another claim's owner in the row (the
// table was emptied and the worker ID claimed again with a generation equal to this one) means
// the lease was lost: the Lease never renews again, Expiry stays in the past and Lost() is
// closed; errors wrap lease.ErrLeaseLost. The process claims a new Lease (and a new Generator
// with its worker ID) to issue snowflake IDs again; leaf-server does so by itself.
package sqllease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/store"
)

// Defaults used by Claim for zero Options fields (docs/contract.md §3.6: TTL 10 s, renew every
// 3 s): those of package lease.
const (
	// DefaultTTL is the lease time granted by each claim and renewal, in database time.
	DefaultTTL = lease.DefaultTTL
	// DefaultRenew is the interval between renewals.
	DefaultRenew = lease.DefaultRenew
	// DefaultMargin is how much earlier than the database the Lease gives up the worker ID:
	// it covers clock-rate differences and the time a pause takes to be noticed.
	DefaultMargin = lease.DefaultMargin
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
	// ErrOptions is returned by Claim for Options outside their documented ranges.
	ErrOptions = errors.New("sqllease: invalid options")
	// ErrLost is returned (wrapped) by Store (snowflake.HighWater) once a renewal found that
	// the worker ID has another generation or owner in the database, or no row (the error then
	// also matches store.ErrLeaseLost when the store said so). It wraps lease.ErrLeaseLost. It
	// is final: the Lease never renews again; claim a new one.
	ErrLost = fmt.Errorf("sqllease: %w to another node or deleted; claim a new lease", lease.ErrLeaseLost)
	// ErrClosed is returned by Store (snowflake.HighWater) after Close.
	ErrClosed = errors.New("sqllease: lease closed")
)

// Store is what a Lease needs from the database; every store.Store (postgres, mysql,
// sqlite) is one (store.LeaseStore documents the contract). All instants it uses
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

// Range is an inclusive range of worker IDs, Min..Max.
type Range struct {
	Min, Max int64
}

// Options configure Claim. The zero value means the defaults.
type Options struct {
	// Owner is written into the row's owner column for operators (e.g. "host:port"), at most
	// 240 bytes, followed by " claim <8 hex digits>", random per claim: a renewal that finds
	// another claim's owner in the row has lost the lease (the table was emptied and the
	// worker ID claimed again, restarting its generation). "" means "<hostname>:<pid>".
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
	// Clock is the local clock (pass the generator's, see lease.WithBoot): Expiry ends on
	// its readings, their wall clock and its boot clock, whichever ends first, so a lease
	// that lapsed while the host was suspended is seen as lapsed at resume. nil means
	// lease.SystemClock{}.
	Clock lease.Clock
	// Logger receives claim, renewal failure, loss and release events; nil discards them.
	Logger *slog.Logger
}

// Lease is a claimed worker ID, renewed in the background until Close or until it is lost.
// It is the "sql" snowflake.Source (and so a snowflake.Lease and a snowflake.HighWater): pass
// it as snowflake.Settings.Source. Safe for concurrent use.
type Lease struct {
	st    Store
	owner string // Options.Owner
	// rowOwner is what the claim wrote into the owner column: owner + " claim <nonce>".
	rowOwner   string
	ttl        time.Duration
	clock      lease.Clock
	log        *slog.Logger
	workerID   int64
	generation int64
	// floorMillis is the row's high_water_ms at claim, Unix ms.
	floorMillis int64
	// s is the lease policy: expiry, renewals, loss.
	s *lease.Session

	closeOnce sync.Once
	closeErr  error

	mu sync.Mutex // guards the fields below
	// markMillis is the highest high-water mark the row is known to hold, Unix ms.
	markMillis int64
	// wantMillis is the highest mark Store asked for, Unix ms: the next renewal writes it.
	wantMillis int64
	// dbExpires is the row's expires_at after the last claim or renewal, database clock.
	dbExpires time.Time
	// closed mirrors Close.
	closed bool
	// finalMark is the mark StoreFinal gave (Unix ms; 0: none), written by Close's release.
	finalMark int64
}

// Every store.Store (postgres, mysql, sqlite) is a Store.
var _ Store = store.Store(nil)

var _ snowflake.Source = (*Lease)(nil)

// Claim claims the lowest free worker ID of opts.Workers (or of opts.Layout) in st and starts
// renewing it. First, with opts.MaxPeerClockSkew set, it checks the local clock against the
// live holders' (see Options.MaxPeerClockSkew). A claimed worker ID whose stored high-water
// mark lies more than opts.MaxMarkAhead ahead of the clock is given back for another free
// one (logged). With every worker ID of the range leased, Claim retries for up to
// opts.ClaimWait (TTL + 2 s by default: a crashed holder's lease runs out within TTL) and
// logs once that it waits. A claim that finds no history (the row's first generation and no
// mark) returns at once but serves only TTL + Margin later (lease.Config.NoHistory; Ready
// says so meanwhile, WaitNoHistory waits for it). ctx bounds the claim only; the renewals run
// until Close. Errors: ErrOptions, snowflake.ErrPeerClockSkew, or the claim's error
// (store.ErrNoFreeWorker after ClaimWait, naming the holders with their expiry; a driver
// error).
func Claim(ctx context.Context, st Store, opts Options) (*Lease, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if err := checkPeers(ctx, st, opts); err != nil {
		return nil, err
	}
	rowOwner := opts.Owner + " claim " + nonce()
	claimOpts := opts
	claimOpts.Owner = rowOwner
	sent, cl, err := claim(ctx, st, claimOpts)
	if err != nil {
		return nil, err
	}
	l := &Lease{
		st:          st,
		owner:       opts.Owner,
		rowOwner:    rowOwner,
		ttl:         opts.TTL,
		clock:       opts.Clock,
		log:         opts.Logger.With("worker_id", cl.WorkerID, "generation", cl.Generation),
		workerID:    cl.WorkerID,
		generation:  cl.Generation,
		floorMillis: cl.HighWaterMillis,
		markMillis:  cl.HighWaterMillis,
		dbExpires:   cl.ExpiresAt,
	}
	noHistory := cl.Generation <= 1 && cl.HighWaterMillis <= 0
	l.s, err = lease.Start(lease.Config{
		Policy:    lease.Policy{TTL: opts.TTL, Renew: opts.Renew, Margin: opts.Margin},
		Clock:     opts.Clock,
		Renew:     l.renewRow,
		NoHistory: noHistory,
		Logger:    l.log,
	}, sent, opts.TTL)
	if err != nil {
		_ = st.ReleaseWorker(context.WithoutCancel(ctx), cl.WorkerID, cl.Generation, 0)
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	l.log.Info("claimed snowflake worker ID", "owner", rowOwner, "ttl", l.ttl,
		"range", fmt.Sprintf("%d..%d", opts.Workers.Min, opts.Workers.Max),
		"db_expires", cl.ExpiresAt, "high_water_ms", cl.HighWaterMillis, "no_history", noHistory)
	return l, nil
}

// nonce returns 8 random hex digits.
func nonce() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fill applies the defaults and validates.
func (o *Options) fill() error {
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	if len(o.Owner) > 240 {
		return fmt.Errorf("%w: owner is %d bytes, at most 240", ErrOptions, len(o.Owner))
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
		o.Clock = lease.SystemClock{}
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
	}
	if err := (lease.Policy{TTL: o.TTL, Renew: o.Renew, Margin: o.Margin}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrOptions, err)
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
// the last successful claim or renewal was sent; ended earlier by the wall or boot clock
// after a suspend (lease.Deadline). Once the lease is lost or closed, and while a claim
// without history is held back, it returns lease.Expired (1970, long past). No I/O; the
// generator calls it on every Next.
func (l *Lease) Expiry() time.Time { return l.s.Expiry() }

// Lost returns a channel that is closed when a renewal finds the worker ID held by another
// claim or gone. The Lease is then dead for good: Expiry stays in the past and the generator
// refuses; the caller should log, report not-ready, and claim a new Lease and Generator
// (leaf-server's supervisor does).
func (l *Lease) Lost() <-chan struct{} { return l.s.Lost() }

// Err returns the loss (wrapping ErrLost and lease.ErrLeaseLost), nil while held.
func (l *Lease) Err() error { return l.s.Err() }

// WaitNoHistory waits until a claim without history may serve (at once for one with
// history): see lease.Session.WaitNoHistory.
func (l *Lease) WaitNoHistory(ctx context.Context) error { return l.s.WaitNoHistory(ctx) }

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
// the database has it. A mark at or below the row's is a no-op. Errors: ErrLost (wrapped;
// final), ErrClosed, or the renewal's error (the generator then issues nothing past its
// previous mark).
func (l *Lease) Store(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	l.mu.Lock()
	stored, closed := l.markMillis, l.closed
	l.wantMillis = max(l.wantMillis, ms)
	l.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case ms <= stored:
		return nil
	}
	err := l.s.RenewNow(ctx)
	switch {
	case errors.Is(err, lease.ErrStopped):
		return ErrClosed
	case err != nil:
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.markMillis < ms {
		return fmt.Errorf("sqllease: worker ID %d: the row holds mark %d ms, not %d", l.workerID, l.markMillis, ms)
	}
	return nil
}

// renewRow is the lease.Session's renewal: it extends the row by TTL, raising its mark to the
// highest Store asked for, fenced by the generation and the claim's owner.
func (l *Lease) renewRow(ctx context.Context) (time.Duration, error) {
	l.mu.Lock()
	mark := max(l.wantMillis, l.markMillis)
	l.mu.Unlock()
	got, err := l.st.RenewWorker(ctx, l.workerID, l.generation, l.ttl, mark, clockMillis(l.clock.Now()))
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		return 0, fmt.Errorf("%w: %w", ErrLost, err)
	case err != nil:
		return 0, fmt.Errorf("sqllease: renew worker ID %d: %w", l.workerID, err)
	case got.Owner != l.rowOwner:
		// The table was emptied and the worker ID claimed again: the generation restarted at
		// this claim's. The renewal just extended the other claim's row; it stops now.
		return 0, fmt.Errorf("%w: worker ID %d generation %d is claimed by %q, not this claim (%q): the lease table was emptied and the ID claimed again",
			ErrLost, l.workerID, l.generation, got.Owner, l.rowOwner)
	}
	l.mu.Lock()
	l.dbExpires = got.ExpiresAt
	l.markMillis = max(l.markMillis, got.HighWaterMillis)
	l.mu.Unlock()
	return l.ttl, nil
}

// Close stops the renewals, waits for the goroutine, makes Expiry expired (so the generator
// refuses from now on) and releases the worker ID in the database unless the lease was lost.
// ctx bounds the release. It returns the release's error (nil when lost); later calls return
// the first call's result. A Generator using the Lease must not be used afterwards (it would
// refuse anyway).
func (l *Lease) Close(ctx context.Context) error {
	l.closeOnce.Do(func() {
		l.s.Stop()
		l.mu.Lock()
		l.closed = true
		final := l.finalMark
		l.mu.Unlock()
		if l.s.Err() != nil {
			return
		}
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
	// Owner is Options.Owner; the row holds it followed by " claim <nonce>" (RowOwner).
	Owner, RowOwner string
	// TTL, Renew and Margin are the effective options.
	TTL, Renew, Margin time.Duration
	// Expires is the lease's end on the wall clock (UTC); the zero time when lost or closed.
	Expires time.Time
	// HeldUntil is, while a claim without history is held back, when it may serve (wall
	// clock, UTC); the zero time otherwise.
	HeldUntil time.Time
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
	ss := l.s.Stats()
	p := l.s.Policy()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := State{
		WorkerID:            l.workerID,
		Generation:          l.generation,
		Owner:               l.owner,
		RowOwner:            l.rowOwner,
		TTL:                 p.TTL,
		Renew:               p.Renew,
		Margin:              p.Margin,
		Expires:             ss.Expires,
		HeldUntil:           ss.HeldUntil,
		LastRenewal:         ss.LastRenewal,
		DBExpires:           l.dbExpires,
		Renewals:            ss.Renewals,
		RenewFailures:       ss.RenewFailures,
		ConsecutiveFailures: ss.ConsecutiveFailures,
		Lost:                ss.Lost != nil,
		Closed:              l.closed,
	}
	if l.markMillis > 0 {
		s.HighWater = time.UnixMilli(l.markMillis).UTC()
	}
	if ss.LastError != nil {
		s.LastError = ss.LastError.Error()
	}
	return s
}
