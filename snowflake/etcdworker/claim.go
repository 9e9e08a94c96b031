package etcdworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// report is the JSON value of a claim key: who holds it and its wall clock, rewritten on every
// keepalive. Other servers read ts for the peer clock check.
type report struct {
	Addr  string `json:"addr"`  // Options.Owner
	TS    int64  `json:"ts"`    // the holder's wall clock when it wrote this, Unix ms
	Lease string `json:"lease"` // lease ID, hex as etcdctl prints it
	Since int64  `json:"since"` // when the ID was claimed, Unix ms
}

// Worker is a worker ID claimed in etcd, kept alive in the background until Close or until it
// is lost. It is the "etcd" snowflake.Source: pass it as snowflake.Settings.Source. Safe for
// concurrent use.
type Worker struct {
	cli       *clientv3.Client
	opts      Options
	log       *slog.Logger
	workerID  int64
	key       string // claim key
	hwKey     string // high-water key
	lease     clientv3.LeaseID
	createRev int64 // the claim key's CreateRevision: the fencing token of every write
	since     time.Time
	// floorMillis is the stored mark read at claim, Unix ms (0 when none).
	floorMillis int64
	// s is the lease policy: expiry, keepalives, loss.
	s *lease.Session

	// writeSem serialises the writes of the high-water key (keepalive and Store) so that the
	// stored mark only rises; a channel so that Store can give up on its deadline.
	writeSem chan struct{}

	closeOnce sync.Once
	closeErr  error

	mu sync.Mutex // guards the fields below
	// markMillis is the highest mark known stored, Unix ms.
	markMillis int64
	// askedMillis is the highest mark a Store call for the generator returned nil for, Unix ms:
	// the generator issued no ID at or past it.
	askedMillis int64
	// finalMillis is the exact mark StoreFinal gave at a graceful stop (0: none).
	finalMillis int64
	closed      bool
}

var _ snowflake.Source = (*Worker)(nil)

// Claim connects to etcd, checks the local clock against the live holders' reports
// (MaxPeerClockSkew), claims the lowest free worker ID of [MinWorker, MaxWorker], waits until
// the clock has passed the ID's stored high-water mark, and starts the keepalives. An ID that
// has no stored mark (a fresh namespace, or one deleted under running holders) serves only
// TTL + Margin after the claim (Ready says so meanwhile). ctx bounds the whole claim. Errors: ErrOptions, snowflake.ErrPeerClockSkew (wrapped), ErrNoFreeWorker
// (wrapped, naming the holders), or etcd's error (unreachable cluster, authentication).
func Claim(ctx context.Context, opts Options) (*Worker, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	cli, err := newClient(&opts)
	if err != nil {
		return nil, err
	}
	w, err := claim(ctx, cli, opts)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return w, nil
}

func claim(ctx context.Context, cli *clientv3.Client, o Options) (*Worker, error) {
	if err := checkPeers(ctx, cli, &o); err != nil {
		return nil, err
	}
	start := time.Now()
	skipped := map[int64]string{} // IDs given up for a mark too far ahead → why
	waitLogged := false
	for {
		w, holders, err := claimRound(ctx, cli, o, skipped)
		if err != nil || w != nil {
			return w, err
		}
		allSkipped := int64(len(skipped)) == o.MaxWorker-o.MinWorker+1 // waiting cannot help
		if o.ClaimWait < 0 || time.Since(start) >= o.ClaimWait || allSkipped {
			return nil, fmt.Errorf("%w in [%d, %d] under %s after waiting %v: %s",
				ErrNoFreeWorker, o.MinWorker, o.MaxWorker, o.Prefix, time.Since(start).Round(time.Millisecond), describeHolders(holders, skipped))
		}
		if !waitLogged {
			o.Logger.Warn("every snowflake worker ID of the range is held in etcd (or its mark is far ahead); "+
				"waiting for a lease to run out (a holder killed within the last TTL frees its ID then)",
				"min", o.MinWorker, "max", o.MaxWorker, "prefix", o.Prefix, "wait_up_to", o.ClaimWait,
				"holders", describeHolders(holders, skipped))
			waitLogged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcdworker: waiting for a free worker ID: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// claimRound grants a lease and tries the free IDs from the lowest. It returns the Worker, or
// nil and the holders (ID → report text) when no ID could be taken.
func claimRound(ctx context.Context, cli *clientv3.Client, o Options, skipped map[int64]string) (*Worker, map[int64]string, error) {
	prefix := o.Prefix + "/workers/"
	rctx, rcancel := context.WithTimeout(ctx, 3*o.RequestTimeout) // list, grant, and the claims
	defer rcancel()
	resp, err := cli.Get(rctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("etcdworker: list %s at %s: %w", prefix, strings.Join(o.Endpoints, ","), err)
	}
	holders := map[int64]string{}
	for _, kv := range resp.Kvs {
		id, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), prefix), 10, 64)
		if err != nil {
			continue
		}
		holders[id] = string(kv.Value)
	}
	var free []int64
	for id := o.MinWorker; id <= o.MaxWorker; id++ {
		if _, held := holders[id]; !held && skipped[id] == "" {
			free = append(free, id)
		}
	}
	if len(free) == 0 {
		return nil, holders, nil
	}
	sent := lease.Read(o.Clock)
	sentWall := sent.Now.Round(0)
	ttlSec := int64(o.TTL / time.Second)
	g, err := cli.Grant(rctx, ttlSec)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdworker: grant a %ds lease: %w", ttlSec, err)
	}
	ttl := min(o.TTL, time.Duration(g.TTL)*time.Second)
	for _, id := range free {
		key, hwKey := workerKey(o.Prefix, id), highWaterKey(o.Prefix, id)
		val, _ := json.Marshal(report{Addr: o.Owner, TS: sentWall.UnixMilli(), Lease: leaseHex(g.ID), Since: sentWall.UnixMilli()})
		tr, err := cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID)), clientv3.OpGet(hwKey)).
			Commit()
		if err != nil {
			revoke(cli, g.ID)
			return nil, nil, fmt.Errorf("etcdworker: claim %s: %w", key, err)
		}
		if !tr.Succeeded {
			holders[id] = "(taken meanwhile)"
			continue
		}
		rev := tr.Header.Revision
		var markMillis int64
		if kvs := tr.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
			markMillis, err = strconv.ParseInt(string(kvs[0].Value), 10, 64)
			if err != nil {
				revoke(cli, g.ID)
				return nil, nil, fmt.Errorf("etcdworker: %s holds %q, not Unix milliseconds", hwKey, kvs[0].Value)
			}
		}
		if ahead := time.Duration(markMillis-o.wall().UnixMilli()) * time.Millisecond; ahead > o.MaxMarkWait {
			// A clock that once ran far ahead left this mark: waiting would lock the ID out for
			// that long, so free it and take another (issue 15 item 6).
			skipped[id] = fmt.Sprintf("mark %s is %v ahead of this clock", time.UnixMilli(markMillis).UTC().Format(time.RFC3339), ahead.Round(time.Second))
			o.Logger.Warn("snowflake worker ID's high-water mark is far ahead of the clock: taking another ID",
				"worker_id", id, "key", hwKey, "ahead", ahead.Round(time.Millisecond), "max_mark_wait", o.MaxMarkWait)
			_, err := cli.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
			if err != nil {
				revoke(cli, g.ID)
				return nil, nil, fmt.Errorf("etcdworker: free %s: %w", key, err)
			}
			continue
		}
		w := newWorker(cli, o, id, g.ID, rev, markMillis, sentWall)
		w.s, err = lease.Start(lease.Config{
			Policy:    lease.Policy{TTL: o.TTL, Renew: o.Renew, Margin: o.Margin},
			Clock:     o.Clock,
			Renew:     w.keepAliveOnce,
			NoHistory: markMillis == 0,
			Logger:    w.log,
		}, sent, ttl)
		if err != nil {
			revoke(cli, g.ID)
			return nil, nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
		w.log.Info("claimed snowflake worker ID in etcd", "key", key, "lease", leaseHex(g.ID), "ttl", ttl,
			"range", fmt.Sprintf("[%d, %d]", o.MinWorker, o.MaxWorker), "high_water_ms", markMillis, "no_history", markMillis == 0)
		if err := w.waitMark(ctx); err != nil {
			cctx, ccancel := context.WithTimeout(context.Background(), o.RequestTimeout)
			_ = w.Close(cctx)
			ccancel()
			return nil, nil, err
		}
		return w, nil, nil
	}
	revoke(cli, g.ID)
	return nil, holders, nil
}

func newWorker(cli *clientv3.Client, o Options, id int64, leaseID clientv3.LeaseID, rev, markMillis int64, since time.Time) *Worker {
	return &Worker{
		cli:         cli,
		opts:        o,
		log:         o.Logger.With("worker_id", id, "lease", leaseHex(leaseID)),
		workerID:    id,
		key:         workerKey(o.Prefix, id),
		hwKey:       highWaterKey(o.Prefix, id),
		lease:       leaseID,
		createRev:   rev,
		since:       since,
		floorMillis: markMillis,
		writeSem:    make(chan struct{}, 1),
		markMillis:  markMillis,
	}
}

// waitMark waits until the wall clock has passed the stored mark (Claim checked it is at most
// MaxMarkWait ahead); the keepalives run meanwhile.
func (w *Worker) waitMark(ctx context.Context) error {
	ahead := time.Duration(w.floorMillis-w.opts.wall().UnixMilli()+1) * time.Millisecond
	if w.floorMillis == 0 || ahead <= 0 {
		return nil
	}
	w.log.Info("waiting for the clock to pass the worker ID's high-water mark (the previous holder's promise)",
		"high_water", time.UnixMilli(w.floorMillis).UTC().Format(time.RFC3339Nano), "wait", ahead)
	for w.opts.wall().UnixMilli() <= w.floorMillis {
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdworker: waiting for the high-water mark: %w", ctx.Err())
		case <-time.After(min(ahead, 50*time.Millisecond)):
		}
	}
	return nil
}

// revoke drops a lease that claimed nothing (best effort: it expires by itself).
func revoke(cli *clientv3.Client, id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = cli.Revoke(ctx, id)
}

func leaseHex(id clientv3.LeaseID) string { return strconv.FormatInt(int64(id), 16) }

// describeHolders lists who holds the IDs, for the error and the log.
func describeHolders(holders map[int64]string, skipped map[int64]string) string {
	var parts []string
	for id, v := range holders {
		var r report
		if json.Unmarshal([]byte(v), &r) == nil && r.Addr != "" {
			v = r.Addr
		}
		parts = append(parts, fmt.Sprintf("%d held by %s", id, v))
	}
	for id, why := range skipped {
		parts = append(parts, fmt.Sprintf("%d skipped: %s", id, why))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "none held"
	}
	return strings.Join(parts, "; ")
}

// checkPeers is the peer clock check (issue 15 item 5): it lists the live holders, watches
// their next reports (each writes one every Renew) for at most Renew + 1 s, and
// compares the reported wall clocks with the local one at the moment each report arrives.
func checkPeers(ctx context.Context, cli *clientv3.Client, o *Options) error {
	if o.MaxPeerClockSkew <= 0 {
		return nil
	}
	prefix := o.Prefix + "/workers/"
	gctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	resp, err := cli.Get(gctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return fmt.Errorf("etcdworker: list %s at %s: %w", prefix, strings.Join(o.Endpoints, ","), err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, kv := range resp.Kvs {
		want[string(kv.Key)] = true
	}
	wctx, cancel := context.WithTimeout(ctx, o.Renew+time.Second)
	defer cancel()
	var peers []snowflake.Peer
	wch := cli.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	for wr := range wch {
		readAt := o.wall()
		for _, ev := range wr.Events {
			k := string(ev.Kv.Key)
			if ev.Type != clientv3.EventTypePut || !want[k] {
				continue
			}
			delete(want, k)
			var r report
			if json.Unmarshal(ev.Kv.Value, &r) != nil || r.TS == 0 {
				continue
			}
			peers = append(peers, snowflake.Peer{Name: k + " (" + r.Addr + ")", Reported: time.UnixMilli(r.TS), ReadAt: readAt})
		}
		if len(want) == 0 {
			cancel()
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("etcdworker: peer clock check: %w", err)
	}
	if err := snowflake.CheckPeerClock(peers, o.MaxPeerClockSkew); err != nil {
		return fmt.Errorf("etcdworker: %w", err)
	}
	if len(peers) > 0 {
		o.Logger.Info("peer clock check passed", "peers", len(peers), "max_skew", o.MaxPeerClockSkew)
	}
	return nil
}

// errLeaseGone is the loss reason when etcd no longer knows the lease.
var errLeaseGone = errors.New("etcd no longer knows the lease (it expired or was revoked)")
