package snowflake

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults used by New for zero Settings fields.
const (
	// DefaultMaxBackwardWait is the largest clock step back that Next waits out (waiting twice
	// the offset) instead of failing at once: 5 ms, as Leaf's SnowflakeIDGenImpl.
	DefaultMaxBackwardWait = 5 * time.Millisecond
	// DefaultHighWaterWindow is how far ahead of the clock a new high-water mark is stored: 3 s,
	// which is also Leaf's ZooKeeper upload interval. So the mark is stored about once per 3 s
	// while IDs are issued, and a restart waits at most this long for its clock.
	DefaultHighWaterWindow = 3 * time.Second
	// RandomStartBound is the exclusive bound of the random first sequence number of each new
	// millisecond, as Leaf's SnowflakeIDGenImpl (RANDOM.nextInt(100)); capped at half the
	// sequence range for layouts with fewer than 8 sequence bits.
	RandomStartBound = 100
	// DefaultHighWaterTimeout is Settings.HighWaterTimeout's default: 1 s, leaf-server's
	// --wait-timeout default.
	DefaultHighWaterTimeout = time.Second
)

// maxStall bounds how long one Next call waits for the next millisecond while the clock does
// not move at all; past it Next fails with ErrClockBehind instead of waiting for ever.
const maxStall = 20 * time.Millisecond

// Lease is a time-limited claim on the worker ID, such as sqllease.Lease. Expiry returns the
// instant from which another node may own the worker ID; Next refuses with ErrLeaseExpired
// from then on. The zero time means no expiry (a Source without a lease); a lease that was
// lost or released returns an instant in the past. Expiry is called on every Next, so it must
// be cheap (an atomic load) and safe for concurrent use.
type Lease interface {
	Expiry() time.Time
}

// Settings configure New. The zero value means the defaults: DefaultLayout, worker ID 0, the
// system clock (an AnchoredClock), Leaf's random sequence start, a 5 ms backward wait and no
// persisted high-water mark (memory only — set Source, or HighWater, in production).
type Settings struct {
	// Layout is the bit layout; the zero Layout means DefaultLayout(). New validates it
	// (ErrInvalidLayout).
	Layout Layout
	// WorkerID is this generator's worker ID, 0..Layout.MaxWorker() (ErrWorkerRange). It comes
	// from a worker ID source (see Source); leave it 0 when Source is set. Two generators with the
	// same worker ID and layout issue duplicate IDs: a static ID (config, a StatefulSet ordinal)
	// is only as unique as the deployment that hands it out — a copied config or a force-deleted
	// pod is enough to break it.
	WorkerID int64
	// Clock is the time source; nil means a new AnchoredClock (the wall clock at the cost of a
	// monotonic read; steps are seen within AnchorRecheck).
	Clock Clock
	// ZeroStart makes every new millisecond start its sequence at 0. By default (false) it
	// starts at a random value in [0, RandomStartBound), as Leaf does so that callers sharding
	// on the low digits of low-traffic IDs spread evenly; that costs up to 99 of the 4096 IDs
	// a millisecond could hold.
	ZeroStart bool
	// MaxBackwardWait is the largest clock step back (behind the last issued millisecond) that
	// Next waits out by sleeping twice the offset; 0 means DefaultMaxBackwardWait, a negative
	// value means never wait (every step back fails with ErrClockBackwards).
	MaxBackwardWait time.Duration
	// HighWater persists the time high-water mark across restarts; nil keeps it in memory only
	// (a restart whose clock is behind the previous run's last ID can then repeat IDs, as in
	// Leaf). New loads the mark (ErrHighWater on failure).
	HighWater HighWater
	// HighWaterWindow is how far ahead of the clock each stored mark lies, 1 ms..1 h; 0 means
	// DefaultHighWaterWindow. Larger windows store less often but make a restart wait longer.
	HighWaterWindow time.Duration
	// HighWaterAhead is how long before the clock reaches the stored mark Next starts storing
	// the next one in the background (mark = now + HighWaterWindow), so that requests rarely
	// wait for a store; 0 means HighWaterWindow/3, a negative value turns it off (every store
	// then runs when a request needs it). Must be below HighWaterWindow.
	HighWaterAhead time.Duration
	// HighWaterTimeout bounds how long a Next call waits for a store of the mark: past it
	// Next fails with ErrHighWater, even when the store ignores its context (a database
	// that stopped answering without closing the connection). The store itself goes on,
	// for later requests, until max(HighWaterTimeout, HighWaterWindow) (its context's
	// deadline). 0 means DefaultHighWaterTimeout; leaf-server passes --wait-timeout.
	HighWaterTimeout time.Duration
	// Lease, when set, stops Next from issuing IDs once Lease.Expiry() has passed.
	Lease Lease
	// Source, when set, supplies the worker ID, the high-water mark and the lease: New takes
	// Source.WorkerID() as WorkerID, Source as HighWater, and Source as Lease unless its
	// Expiry is the zero time (a source without a lease). WorkerID, HighWater and Lease must
	// then be left zero; New refuses a Settings that sets both.
	Source Source
}

// Generator issues snowflake IDs for one worker ID, as Leaf's SnowflakeIDGenImpl does, with
// these differences: clock waits do not hold the lock, the wait for the next millisecond is
// bounded, and a persisted high-water mark protects restarts. It is safe for concurrent use.
type Generator struct {
	layout          Layout
	epochMillis     int64
	maxTime         int64
	maxSeq          int64
	timeShift       int   // WorkerBits + SequenceBits
	workerPart      int64 // worker << SequenceBits
	randomBound     int64 // 0 means ZeroStart
	clock           Clock
	maxBackwardWait time.Duration
	hw              HighWater
	window          int64 // HighWaterWindow in ms
	ahead           int64 // HighWaterAhead in ms; 0 is off
	storeTimeout    time.Duration
	lease           Lease
	src             Source            // Settings.Source; nil without (Ready)
	hwWatch         *watchedHighWater // hw, remembering the last Store's outcome (Ready); nil without hw

	mu sync.Mutex // guards lastMillis, seq, floorMillis, markMillis, issued, sealed, flight
	// lastMillis is the Unix ms of the last issued ID (math.MinInt64 before the first).
	lastMillis int64
	// seq is the sequence number of the last issued ID.
	seq int64
	// floorMillis is the mark loaded at start: no ID below it (math.MinInt64 when none).
	floorMillis int64
	// markMillis is the stored mark: no ID at or past it (math.MaxInt64 without HighWater).
	markMillis int64
	// issued counts IDs returned by Next.
	issued int64
	// sealed is set by Seal: Next issues nothing more.
	sealed bool
	// flight is the mark store in progress, nil when none: at most one runs at a time, so
	// HighWater.Store sees one caller at a time and increasing marks.
	flight *markFlight

	backEvents   atomic.Int64
	backWait     atomic.Int64 // ns
	seqWaits     atomic.Int64
	seqWait      atomic.Int64 // ns
	markStores   atomic.Int64
	markFailures atomic.Int64
}

// New returns a Generator for s. It validates the layout at the clock's current time and the
// worker ID, and loads the high-water mark (which may block on I/O, bounded by ctx). Errors:
// ErrInvalidLayout, ErrWorkerRange, ErrHighWater, or a settings error for an out-of-range
// HighWaterWindow or for Source given together with WorkerID, HighWater or Lease.
func New(ctx context.Context, s Settings) (*Generator, error) {
	if s.Source != nil {
		if s.WorkerID != 0 || s.HighWater != nil || s.Lease != nil {
			return nil, fmt.Errorf("snowflake: Settings.Source %q given with WorkerID, HighWater or Lease", s.Source.Name())
		}
		s.WorkerID, s.HighWater = s.Source.WorkerID(), s.Source
		if !s.Source.Expiry().IsZero() {
			s.Lease = s.Source
		}
	}
	if s.Layout.isZero() {
		s.Layout = DefaultLayout()
	}
	if s.Clock == nil {
		s.Clock = NewAnchoredClock()
	}
	if err := s.Layout.Validate(s.Clock.Now()); err != nil {
		return nil, err
	}
	if err := s.Layout.CheckWorker(s.WorkerID); err != nil {
		return nil, err
	}
	if s.MaxBackwardWait == 0 {
		s.MaxBackwardWait = DefaultMaxBackwardWait
	}
	if s.HighWaterWindow == 0 {
		s.HighWaterWindow = DefaultHighWaterWindow
	}
	if s.HighWaterWindow < time.Millisecond || s.HighWaterWindow > time.Hour {
		return nil, fmt.Errorf("snowflake: high-water window %v not in [1ms, 1h]", s.HighWaterWindow)
	}
	if s.HighWaterAhead == 0 {
		s.HighWaterAhead = s.HighWaterWindow / 3
	}
	if s.HighWaterAhead >= s.HighWaterWindow {
		return nil, fmt.Errorf("snowflake: high-water ahead %v not below the window %v", s.HighWaterAhead, s.HighWaterWindow)
	}
	if s.HighWaterTimeout == 0 {
		s.HighWaterTimeout = DefaultHighWaterTimeout
	}
	if s.HighWaterTimeout < 0 {
		return nil, fmt.Errorf("snowflake: high-water timeout %v is negative", s.HighWaterTimeout)
	}
	g := &Generator{
		layout:          s.Layout,
		epochMillis:     s.Layout.EpochMillis(),
		maxTime:         s.Layout.MaxTime(),
		maxSeq:          s.Layout.MaxSequence(),
		timeShift:       s.Layout.WorkerBits + s.Layout.SequenceBits,
		workerPart:      s.WorkerID << s.Layout.SequenceBits,
		clock:           s.Clock,
		maxBackwardWait: s.MaxBackwardWait,
		hw:              s.HighWater,
		window:          s.HighWaterWindow.Milliseconds(),
		ahead:           max(s.HighWaterAhead.Milliseconds(), 0),
		storeTimeout:    s.HighWaterTimeout,
		lease:           s.Lease,
		src:             s.Source,
		lastMillis:      math.MinInt64,
		floorMillis:     math.MinInt64,
		markMillis:      math.MaxInt64,
	}
	if !s.ZeroStart {
		g.randomBound = min(RandomStartBound, (g.maxSeq+1)/2)
	}
	if g.hw != nil {
		g.hwWatch = &watchedHighWater{HighWater: g.hw}
		g.hw = g.hwWatch
		mark, err := g.hw.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: load: %w", ErrHighWater, err)
		}
		if !mark.IsZero() {
			g.floorMillis = mark.UnixMilli()
		}
		g.markMillis = math.MinInt64 // the first Next stores a mark before it issues
	}
	return g, nil
}

// Layout returns the generator's bit layout.
func (g *Generator) Layout() Layout { return g.layout }

// WorkerID returns the generator's worker ID.
func (g *Generator) WorkerID() int64 { return g.workerPart >> g.layout.SequenceBits }

// Next returns a new ID, unique among all IDs of this layout issued by generators with other
// worker IDs and by this worker ID in earlier runs that shared the HighWater. IDs of one
// generator increase strictly.
//
// Rules (Leaf's SnowflakeIDGenImpl unless noted):
//   - Within the millisecond of the last ID, the sequence counts up; when it is used up, Next
//     sleeps until the next millisecond and tries again (Leaf spins). If the clock stands still
//     for 20 ms meanwhile, Next fails with ErrClockBehind.
//   - A new millisecond starts the sequence at random in [0, 100) unless Settings.ZeroStart.
//   - Clock behind the last ID by at most MaxBackwardWait: sleep twice the offset without
//     holding the lock, read the clock again; still behind: *ClockBackwardsError with
//     ErrClockBehind (code -1). Behind by more, or behind again after having waited once in this
//     call: ErrClockBackwards (code -3).
//   - Clock behind the high-water mark loaded at start: ErrClockBehindMark (code -3) until the
//     clock reaches it (leaf-go).
//   - At or past the stored high-water mark: store mark = now + HighWaterWindow first (waits
//     for HighWater.Store at most HighWaterTimeout; ErrHighWater if it fails or takes longer,
//     and no ID is issued). Within HighWaterAhead of the mark, the next mark is stored in the
//     background while IDs are still issued below the current one (leaf-go).
//   - ctx done before or during a wait: ErrInterrupted wrapping ctx.Err() (code -2). The
//     waits themselves (at most 2×MaxBackwardWait, or until the next millisecond) run to their
//     end; only HighWater.Store sees ctx directly.
//   - Lease expired: ErrLeaseExpired. Clock before the epoch or past Layout.End: ErrTimeRange.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, interrupted(err)
	}
	waitedBack := false        // this call has already waited out a clock step back
	var markDeadline time.Time // when this call stops waiting for mark stores
	var stalled time.Duration
	stallMillis := int64(math.MinInt64)
	for {
		g.mu.Lock()
		now := g.clock.Now()
		ms := now.UnixMilli()
		switch {
		case g.sealed:
			g.mu.Unlock()
			return 0, ErrSealed
		case ms < g.floorMillis:
			floor := g.floorMillis
			g.mu.Unlock()
			return 0, &ClockBackwardsError{Behind: millis(floor - ms), Err: ErrClockBehindMark}
		case ms < g.lastMillis:
			behind := millis(g.lastMillis - ms)
			g.mu.Unlock()
			g.backEvents.Add(1)
			if behind > g.maxBackwardWait {
				return 0, &ClockBackwardsError{Behind: behind, Err: ErrClockBackwards}
			}
			if waitedBack {
				return 0, &ClockBackwardsError{Behind: behind, Err: ErrClockBehind}
			}
			waitedBack = true
			g.clock.Sleep(2 * behind)
			g.backWait.Add(int64(2 * behind))
			if err := ctx.Err(); err != nil {
				return 0, interrupted(err)
			}
			continue
		case g.lease != nil && expired(now, g.lease.Expiry()):
			exp := g.lease.Expiry()
			g.mu.Unlock()
			return 0, g.leaseError(now, exp)
		case ms-g.epochMillis < 0 || ms-g.epochMillis > g.maxTime:
			g.mu.Unlock()
			return 0, fmt.Errorf("%w: clock reads %s, layout covers %s to %s", ErrTimeRange,
				now.UTC().Format(time.RFC3339Nano), g.layout.Epoch.UTC().Format(time.RFC3339Nano), g.layout.End().Format(time.RFC3339Nano))
		case ms >= g.markMillis:
			f := g.storeMarkLocked(ms)
			g.mu.Unlock()
			if markDeadline.IsZero() {
				markDeadline = time.Now().Add(g.storeTimeout)
			}
			if err := g.awaitMark(ctx, f, markDeadline); err != nil {
				return 0, err
			}
			continue
		case ms == g.lastMillis:
			if g.seq >= g.maxSeq {
				g.mu.Unlock()
				d := time.UnixMilli(ms + 1).Sub(now)
				if ms == stallMillis {
					stalled += d
					if stalled > maxStall {
						return 0, &ClockBackwardsError{Behind: d, Err: ErrClockBehind}
					}
				}
				stallMillis = ms
				g.seqWaits.Add(1)
				g.clock.Sleep(d)
				g.seqWait.Add(int64(d))
				if err := ctx.Err(); err != nil {
					return 0, interrupted(err)
				}
				continue
			}
			g.seq++
		default: // a new millisecond
			g.lastMillis = ms
			g.seq = 0
			if g.randomBound > 0 {
				g.seq = rand.Int64N(g.randomBound)
			}
		}
		id := (ms-g.epochMillis)<<g.timeShift | g.workerPart | g.seq
		g.issued++
		if g.ahead > 0 && g.flight == nil && g.markMillis-ms <= g.ahead {
			g.storeMarkLocked(ms) // the next mark, in the background
		}
		g.mu.Unlock()
		return id, nil
	}
}

// markFlight is one HighWater.Store of the generator's: done is closed when it returned, err
// is its result then.
type markFlight struct {
	mark int64 // Unix ms
	done chan struct{}
	err  error
}

// storeMarkLocked returns the mark store in progress, or starts one of ms + HighWaterWindow in
// a goroutine of its own, bounded by the larger of HighWaterWindow (a store that takes longer
// would store a mark the clock has already passed) and HighWaterTimeout. Called with mu held. The store belongs
// to no request: requests wait for it (awaitMark) only as long as they may, and a store that
// outlives them (one that ignores its context) delays the next store, never a request.
func (g *Generator) storeMarkLocked(ms int64) *markFlight {
	if g.flight != nil {
		return g.flight
	}
	f := &markFlight{mark: ms + g.window, done: make(chan struct{})}
	g.flight = f
	go func() {
		// A store may take up to the window: the mark it stores covers that long. Requests
		// wait for it at most storeTimeout each.
		ctx, cancel := context.WithTimeout(context.Background(), max(g.storeTimeout, millis(g.window)))
		err := g.hw.Store(ctx, time.UnixMilli(f.mark))
		cancel()
		if err != nil {
			g.markFailures.Add(1)
			err = fmt.Errorf("%w: not stored (%d): no ID is issued past the last stored mark until a store "+
				"succeeds; free space where the mark is kept (the data dir, or the worker ID's store): %w", ErrHighWater, f.mark, err)
		} else {
			g.markStores.Add(1)
		}
		g.mu.Lock()
		if err == nil {
			g.markMillis = max(g.markMillis, f.mark)
		}
		f.err = err
		g.flight = nil
		g.mu.Unlock()
		close(f.done)
	}()
	return f
}

// KeepAhead stores the high-water mark in the background whenever the clock comes within
// HighWaterAhead of it, also while no IDs are asked for, until ctx is done: so the first
// request after a quiet spell (or the first after New) does not wait for a store either. It
// looks every HighWaterAhead/2 and stores nothing while the clock is behind the floor or the
// lease has expired. It returns at once without HighWater or with HighWaterAhead turned off.
// leaf-server runs it for the generator's life, until shutdown begins.
func (g *Generator) KeepAhead(ctx context.Context) {
	if g.hw == nil || g.ahead <= 0 {
		return
	}
	tick := time.NewTicker(max(millis(g.ahead)/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := g.clock.Now()
		ms := now.UnixMilli()
		if g.lease != nil && expired(now, g.lease.Expiry()) {
			continue
		}
		g.mu.Lock()
		if g.flight == nil && !g.sealed && ms >= g.floorMillis && (g.markMillis == math.MinInt64 || g.markMillis-ms <= g.ahead) {
			g.storeMarkLocked(ms)
		}
		g.mu.Unlock()
	}
}

// awaitMark waits for f until deadline or ctx ends, and returns its error, ErrHighWater when
// the deadline passed first, or ErrInterrupted.
func (g *Generator) awaitMark(ctx context.Context, f *markFlight, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return interrupted(ctx.Err())
	case <-timer.C:
		return fmt.Errorf("%w: not stored (%d): the store gave no answer within %v (is the database or disk that keeps it reachable?); no ID is issued past the last stored mark until a store succeeds", ErrHighWater, f.mark, g.storeTimeout)
	}
}

// expired reports whether a lease with expiry exp no longer backs IDs at now; the zero time
// never expires. Both the monotonic and the wall clock count (LeaseExpired): a suspend stops
// the one but not the other.
func expired(now, exp time.Time) bool { return LeaseExpired(now, exp) }

// leaseError is Next's ErrLeaseExpired for a lease whose Expiry read exp at now. An expiry
// that is not a real instant (the zero time, or before the epoch: a lease lost or released
// reports one long past) is not printed as a time.
func (g *Generator) leaseError(now, exp time.Time) error {
	if exp.IsZero() || exp.Before(g.layout.Epoch) {
		return fmt.Errorf("%w: the lease does not back IDs now (lost or released, and another node may hold the worker ID; "+
			"or a new claim still waiting out any previous holder: /readyz says which); no snowflake IDs from this claim until it does", ErrLeaseExpired)
	}
	return fmt.Errorf("%w: expired at %s, %v ago: its renewals failed since (see the log); no snowflake IDs "+
		"until one succeeds", ErrLeaseExpired, exp.UTC().Format(time.RFC3339Nano), now.Sub(exp).Round(time.Millisecond))
}

func interrupted(err error) error { return fmt.Errorf("%w: %w", ErrInterrupted, err) }

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// Stats is a snapshot of a Generator's state and counters, for status pages and metrics.
// Counters only grow.
type Stats struct {
	// WorkerID is the generator's worker ID.
	WorkerID int64
	// Layout is the generator's bit layout.
	Layout Layout
	// LastIssued is the millisecond of the last issued ID; zero before the first.
	LastIssued time.Time
	// Floor is the high-water mark loaded at start: no ID was or will be issued below it. Zero
	// when none was stored (or without HighWater).
	Floor time.Time
	// HighWater is the currently stored mark: no ID is issued at or past it until a higher one
	// is stored. Zero without HighWater or before the first store.
	HighWater time.Time
	// Issued counts IDs returned by Next.
	Issued int64
	// ClockBackwardEvents counts Next calls that saw the clock behind the last issued ID.
	ClockBackwardEvents int64
	// ClockBackwardWait is the total time slept waiting out clock steps back.
	ClockBackwardWait time.Duration
	// SequenceWaits counts waits for the next millisecond after the sequence was used up.
	SequenceWaits int64
	// SequenceWait is the total time slept in those waits.
	SequenceWait time.Duration
	// HighWaterStores counts successful HighWater.Store calls; HighWaterFailures failed ones.
	HighWaterStores, HighWaterFailures int64
}

// Stats returns a snapshot of the generator's state and counters.
func (g *Generator) Stats() Stats {
	g.mu.Lock()
	last, floor, mark, issued := g.lastMillis, g.floorMillis, g.markMillis, g.issued
	g.mu.Unlock()
	return Stats{
		WorkerID:            g.WorkerID(),
		Layout:              g.layout,
		LastIssued:          instant(last),
		Floor:               instant(floor),
		HighWater:           instant(mark),
		Issued:              issued,
		ClockBackwardEvents: g.backEvents.Load(),
		ClockBackwardWait:   time.Duration(g.backWait.Load()),
		SequenceWaits:       g.seqWaits.Load(),
		SequenceWait:        time.Duration(g.seqWait.Load()),
		HighWaterStores:     g.markStores.Load(),
		HighWaterFailures:   g.markFailures.Load(),
	}
}

// instant converts Unix ms to a UTC time, with the sentinels math.MinInt64/MaxInt64 as zero.
func instant(ms int64) time.Time {
	if ms == math.MinInt64 || ms == math.MaxInt64 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
