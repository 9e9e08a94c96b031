package sqllease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/store"
)

// checkPeers is Start's peer clock check (Options.MaxPeerClockSkew): the live holders'
// reported clocks against the local wall clock. A holder reported its clock as it sent its
// last claim or renewal, and the database stamped that write with its own clock (updated_at);
// reading the database's now here, at a known local instant, maps that stamp onto the local
// clock, so the age of a report (up to one renewal interval) does not count as skew.
func checkPeers(ctx context.Context, st Store, opts Options) error {
	if opts.MaxPeerClockSkew <= 0 {
		return nil
	}
	before := opts.Clock.Now().Round(0)
	holders, dbNow, err := st.LiveHolders(ctx)
	if err != nil {
		return fmt.Errorf("sqllease: peer clock check: %w", err)
	}
	after := opts.Clock.Now().Round(0)
	// The local instant at which the database read dbNow: the middle of the round trip.
	local := before.Add(after.Sub(before) / 2)
	var peers []snowflake.Peer
	for _, h := range holders {
		if h.ClockMillis <= 0 {
			continue // a holder that reports no clock (an older leaf-go)
		}
		peers = append(peers, snowflake.Peer{
			Name:     fmt.Sprintf("worker %d (%s)", h.WorkerID, h.Owner),
			Reported: time.UnixMilli(h.ClockMillis),
			ReadAt:   local.Add(h.WrittenAt.Sub(dbNow)),
		})
	}
	if err := snowflake.CheckPeerClock(peers, opts.MaxPeerClockSkew); err != nil {
		return fmt.Errorf("sqllease: %w", err)
	}
	return nil
}

// claim claims a worker ID of opts.Workers. A claimed row whose high-water mark lies more
// than opts.MaxMarkAhead ahead of the clock is held while claim tries the next free worker
// ID, and released once one with a usable mark is found; when none is, the one with the
// lowest mark is kept (the generator then waits for the clock to reach it) and the others
// are released. sent is the local instant before the kept claim was sent.
func claim(ctx context.Context, st Store, opts Options) (sent lease.Instant, kept store.Lease, err error) {
	type held struct {
		sent lease.Instant
		l    store.Lease
	}
	var skipped []held
	defer func() {
		for _, h := range skipped {
			if h.l == kept {
				continue
			}
			// The row's lease runs out by itself TTL later if this fails.
			if rerr := st.ReleaseWorker(context.WithoutCancel(ctx), h.l.WorkerID, h.l.Generation, 0); rerr != nil {
				opts.Logger.Warn("could not give back a skipped snowflake worker ID", "worker_id", h.l.WorkerID, "err", rerr)
			}
		}
	}()
	began := time.Now()
	waitLogged := false
	for {
		sent = lease.Read(opts.Clock)
		c := store.Claim{Owner: opts.Owner, MinWorker: opts.Workers.Min, MaxWorker: opts.Workers.Max,
			TTL: opts.TTL, ClockMillis: clockMillis(sent.Now)}
		kept, err = st.ClaimWorker(ctx, c)
		switch {
		case errors.Is(err, store.ErrNoFreeWorker) && len(skipped) > 0:
			best := skipped[0]
			for _, h := range skipped[1:] {
				if h.l.HighWaterMillis < best.l.HighWaterMillis {
					best = h
				}
			}
			kept, sent = best.l, best.sent
			opts.Logger.Warn("no other free snowflake worker ID: keeping one whose high-water mark is far ahead; "+
				"no snowflake IDs until the clock reaches it",
				"worker_id", kept.WorkerID, "high_water", kept.HighWater(), "ahead", kept.HighWater().Sub(sent.Now.Round(0)))
			return sent, kept, nil
		case errors.Is(err, store.ErrNoFreeWorker):
			waited := time.Since(began)
			if opts.ClaimWait < 0 || waited >= opts.ClaimWait {
				return lease.Instant{}, store.Lease{}, fmt.Errorf("sqllease: claim a worker ID in %d..%d after waiting %v: %w; %s",
					c.MinWorker, c.MaxWorker, waited.Round(time.Millisecond), err, holders(ctx, st, c))
			}
			if !waitLogged {
				opts.Logger.Warn("every snowflake worker ID of the range is leased; waiting for a lease to run out "+
					"(a holder killed within the last TTL frees its ID then)",
					"range", fmt.Sprintf("%d..%d", c.MinWorker, c.MaxWorker), "wait_up_to", opts.ClaimWait, "holders", holders(ctx, st, c))
				waitLogged = true
			}
			t := time.NewTimer(min(max(opts.TTL/10, 20*time.Millisecond), time.Second))
			select {
			case <-ctx.Done():
				t.Stop()
				return lease.Instant{}, store.Lease{}, fmt.Errorf("sqllease: claim a worker ID in %d..%d: %w (waiting for a lease to run out: %w)",
					c.MinWorker, c.MaxWorker, context.Cause(ctx), err)
			case <-t.C:
			}
			continue
		case err != nil:
			return lease.Instant{}, store.Lease{}, fmt.Errorf("sqllease: claim a worker ID in %d..%d: %w", c.MinWorker, c.MaxWorker, err)
		}
		ahead := time.UnixMilli(kept.HighWaterMillis).Sub(sent.Now.Round(0))
		if opts.MaxMarkAhead < 0 || kept.HighWaterMillis == 0 || ahead <= opts.MaxMarkAhead {
			if len(skipped) > 0 {
				opts.Logger.Warn("skipped snowflake worker IDs whose high-water mark lies far ahead of the clock (a clock that once ran ahead)",
					"worker_id", kept.WorkerID, "skipped", len(skipped), "max_mark_ahead", opts.MaxMarkAhead)
			}
			return sent, kept, nil
		}
		opts.Logger.Warn("claimed snowflake worker ID's high-water mark lies far ahead of the clock: trying another free worker ID instead of waiting",
			"worker_id", kept.WorkerID, "high_water", kept.HighWater(), "ahead", ahead, "max_mark_ahead", opts.MaxMarkAhead)
		skipped = append(skipped, held{sent: sent, l: kept})
	}
}

// holders describes the live holders of c's range for the no-free-worker error and log:
// "held by: worker 3 by host/a:8080 until 2026-12-01T20:00:01.5Z (in 1.2s), …" (instants
// and durations by the database's clock), or why they could not be read.
func holders(ctx context.Context, st Store, c store.Claim) string {
	hs, now, err := st.LiveHolders(ctx)
	if err != nil {
		return fmt.Sprintf("holders not read: %v", err)
	}
	var parts []string
	for _, h := range hs {
		if h.WorkerID < c.MinWorker || h.WorkerID > c.MaxWorker {
			continue
		}
		owner := h.Owner
		if owner == "" {
			owner = "(no owner)"
		}
		parts = append(parts, fmt.Sprintf("worker %d by %s until %s (in %v)", h.WorkerID, owner,
			h.ExpiresAt.UTC().Format(time.RFC3339Nano), h.ExpiresAt.Sub(now).Round(time.Millisecond)))
	}
	if len(parts) == 0 {
		return "held by: none any more (retry)"
	}
	return "held by: " + strings.Join(parts, ", ")
}

// clockMillis is t's wall clock in Unix ms, as a holder reports it; 0 (none) before 1970.
func clockMillis(t time.Time) int64 { return max(t.UnixMilli(), 0) }
