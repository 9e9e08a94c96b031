package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// unclaimedSource stands in for a worker ID that could not be claimed yet because the
// coordinator was unreachable at start (zkworker.ErrUnreachable: ZooKeeper without
// --zk-cache-start). Snowflake fails closed on it: its claim counts as lost from the start, so
// the generator refuses every ID (Expiry long past), /readyz is 503 with the reason, and the
// supervisor claims through the normal path until ZooKeeper answers (issue 20 item 3). It
// holds no worker ID: WorkerID is 0 only because the generator needs one, and no ID is ever
// issued with it. Safe for concurrent use.
type unclaimedSource struct {
	name string
	err  error
	lost chan struct{} // closed
}

var _ snowflake.Source = unclaimedSource{}

func newUnclaimedSource(name string, err error) unclaimedSource {
	lost := make(chan struct{})
	close(lost)
	return unclaimedSource{name: name, err: err, lost: lost}
}

// Load returns the zero time: there is no mark (no ID is issued).
func (unclaimedSource) Load(context.Context) (time.Time, error) { return time.Time{}, nil }

// Store does nothing: no ID is issued.
func (unclaimedSource) Store(context.Context, time.Time) error { return nil }

// Expiry returns lease.Expired: the generator refuses every ID.
func (unclaimedSource) Expiry() time.Time { return lease.Expired }

// Name returns the source's kind (e.g. "zookeeper").
func (u unclaimedSource) Name() string { return u.name }

// WorkerID returns 0; nothing is issued with it.
func (unclaimedSource) WorkerID() int64 { return 0 }

// Ready returns why no worker ID is claimed.
func (u unclaimedSource) Ready() error { return u.err }

// LastHeartbeat returns the zero time.
func (unclaimedSource) LastHeartbeat() time.Time { return time.Time{} }

// Details says that no worker ID is claimed, and why.
func (u unclaimedSource) Details() any {
	return map[string]any{"claimed": false, "error": u.err.Error()}
}

// Close does nothing.
func (unclaimedSource) Close(context.Context) error { return nil }

// unclaimedSnowflake is the claim in use while the first claim fails closed: a generator on
// an unclaimedSource, whose claim is lost from the start so that the supervisor claims again
// at once (and with back-off until one succeeds).
func unclaimedSnowflake(ctx context.Context, cfg Config, clock snowflake.Clock, cause error, log *slog.Logger) (claimed, error) {
	src := newUnclaimedSource(cfg.WorkerIDSource, cause)
	gen, err := snowflake.New(ctx, snowflake.Settings{Layout: cfg.Layout(), ZeroStart: !cfg.RandomStart, Clock: clock, Source: src,
		HighWaterTimeout: cfg.WaitTimeout})
	if err != nil {
		return claimed{}, err
	}
	log.Warn("snowflake fails closed: no worker ID could be claimed at start; snowflake requests get an error and /readyz is 503 until a claim succeeds",
		"source", cfg.WorkerIDSource, "err", cause)
	return claimed{gen: gen, src: src, lost: src.lost, stop: func() {}}, nil
}
