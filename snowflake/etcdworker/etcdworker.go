// Package etcdworker is the `etcd` worker-ID source: a snowflake worker ID claimed as a key in an
// etcd cluster (go.etcd.io/etcd/client/v3), the design this project grew from (issue 15). Its
// Worker is a snowflake.Source.
//
// Layout under Options.Prefix (leaf-server: /leaf-go/<leaf-name>):
//
//	<prefix>/workers/<id>    the claim: attached to the holder's lease; its value is a JSON
//	                         report {"addr","ts","lease","since"} rewritten every KeepAlive
//	                         ("ts": the holder's wall clock, Unix ms, for the peer clock check)
//	<prefix>/highwater/<id>  the time high-water mark of worker <id>, decimal Unix ms; no lease,
//	                         it outlives its holders
//
// Rules that keep IDs unique:
//
//  1. Claim: a lease of TTL (10 s) is granted, then the lowest free ID of [MinWorker, MaxWorker]
//     is taken in one transaction that succeeds only while the key is absent (CreateRevision
//     == 0) and that reads the ID's high-water mark in the same revision. Raft makes the
//     transaction linearizable: two claimers cannot both win one key.
//  2. Stop before etcd may hand the ID on (the shared policy of package lease, whose Session
//     the Worker holds): Expiry is the local instant read just before the
//     last successful keepalive was sent, plus TTL − Margin. etcd's leader computes the lease's
//     end later (when the keepalive arrives), and a new leader extends every lease, so the
//     local expiry comes first while the clock rates differ by less than Margin/TTL. A host
//     suspended with the process (a VM paused, a laptop lid) does not advance Go's monotonic
//     clock, so Expiry also checks the wall and boot clocks (issue 15 item 7): any passing
//     ends the lease. The generator refuses from Expiry on and resumes only after a keepalive of the
//     same lease succeeds and the key is still this claim's (CreateRevision unchanged).
//  3. A lost lease is a lost ID: a keepalive answered "lease not found" or a key that is no
//     longer this claim's (taken over, or deleted: `etcdctl del --prefix` of the namespace, a
//     restore) makes the loss final; errors wrap lease.ErrLeaseLost. Ready reports it forever;
//     a new Worker and a new generator issue again (leaf-server's supervisor claims anew by
//     itself).
//  4. The time high-water mark lives in its own key, written only while the claim holds
//     (the write compares the claim key's CreateRevision). It is raised in the background on
//     every keepalive to MarkAhead past the clock, so the generator's Store rarely waits on
//     etcd (and never longer than StoreTimeout); Close lowers it to the highest mark the
//     generator asked for, which bounds every ID it issued. A new holder loads it and waits
//     until its clock has passed it (at most MaxMarkWait; a mark further ahead, as left by a
//     clock that jumped a day ahead, makes Claim take another free ID instead). Since the
//     successor's claim reads the mark in the transaction that takes the key, after every
//     fenced write of the old holder, the old holder's IDs (all below its stored mark) and the
//     successor's (all past it) differ in their time field even if the old holder wakes up
//     and issues before it notices the loss: rule 2 is the first line, this the second. A
//     claim that finds no mark (a fresh namespace, or one deleted with its holders still
//     running) has no such line: it is held back TTL + Margin after the claim
//     (lease.Config.NoHistory), by when every holder whose key vanished has stopped.
//  5. Close revokes the lease: the claim key disappears at once and the ID is free for the
//     next server (SIGTERM in leaf-server). A crashed holder's ID is free TTL after its last
//     keepalive.
//
// With every ID of the range held, Claim waits up to ClaimWait (default TTL + 2 s, enough for
// the lease of a holder that was just killed to run out), logging once that it waits, then
// fails with ErrNoFreeWorker naming the holders.
package etcdworker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// Defaults for zero Options fields (issue 15: a 10-second lease renewed every 3 s).
const (
	// DefaultTTL is the lease's time to live, in whole seconds as etcd grants it.
	DefaultTTL = lease.DefaultTTL
	// DefaultRenew is the interval between keepalives (and clock reports).
	DefaultRenew = lease.DefaultRenew
	// DefaultMargin is how much earlier than TTL the Worker stops issuing: it covers clock-rate
	// differences and the delay of a keepalive.
	DefaultMargin = lease.DefaultMargin
	// DefaultMarkAhead is how far ahead of the clock the background keepalive raises the
	// high-water mark: TTL − Margin (8 s, the longest the generator issues after the last
	// successful keepalive) plus the generator's window (3 s) plus 1 s, so that the generator's
	// own Store never has to reach etcd while the lease is valid, even with keepalives failing.
	// Close lowers the mark again to the generator's own (see Worker.Close).
	DefaultMarkAhead = 12 * time.Second
	// DefaultStoreTimeout bounds a high-water Store made for the generator.
	DefaultStoreTimeout = time.Second
	// DefaultMaxMarkWait is the longest a new holder waits for its clock to pass the stored
	// mark; a mark further ahead makes Claim take another ID.
	DefaultMaxMarkWait = 15 * time.Second
	// DefaultDialTimeout bounds each connection attempt to an endpoint.
	DefaultDialTimeout = 5 * time.Second
	// DefaultRequestTimeout bounds each etcd request Claim makes.
	DefaultRequestTimeout = 5 * time.Second
)

var (
	// ErrOptions is returned by Claim for Options outside their documented ranges.
	ErrOptions = errors.New("etcdworker: invalid options")
	// ErrNoFreeWorker is returned (wrapped) by Claim when every worker ID of the range stayed
	// held for ClaimWait, or had a high-water mark too far ahead.
	ErrNoFreeWorker = errors.New("etcdworker: no free worker ID")
	// ErrLost is returned (wrapped) by Store once the lease or the claim key is gone: final.
	// It wraps lease.ErrLeaseLost.
	ErrLost = fmt.Errorf("etcdworker: %w", lease.ErrLeaseLost)
	// ErrClosed is returned by Store after Close.
	ErrClosed = errors.New("etcdworker: closed")
)

// Options configure Claim. Zero fields take the defaults.
type Options struct {
	// Endpoints are the etcd client addresses, host:port or http(s)://host:port; at least one.
	Endpoints []string
	// Prefix is the key prefix, e.g. /leaf-go/<leaf-name>; required, starts with "/", no
	// trailing "/".
	Prefix string
	// Username and Password authenticate to etcd when Username is set.
	Username, Password string
	// CertFile and KeyFile are a client certificate (PEM) for mutual TLS; CAFile the CA
	// bundle that signed the servers' certificates. Any of them set turns TLS on.
	CertFile, KeyFile, CAFile string
	// DialTimeout bounds each connection attempt; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// RequestTimeout bounds each etcd request of Claim (an unreachable cluster fails the claim
	// after it); 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Owner identifies this server in the claim key's report ("addr"), e.g. host/listen
	// address; "" means "<hostname>:<pid>".
	Owner string
	// Layout is the snowflake layout the worker ID is for; zero means snowflake.DefaultLayout().
	Layout snowflake.Layout
	// MinWorker and MaxWorker bound the claimed worker IDs, 0 ≤ MinWorker ≤ MaxWorker ≤
	// Layout.MaxWorker(); MaxWorker < 0 means Layout.MaxWorker(). Disjoint ranges give
	// clusters that share a layout but not an etcd disjoint IDs (issue 15 item 3).
	MinWorker, MaxWorker int64
	// TTL is the lease's time to live, whole seconds, 2 s..1 h; 0 means DefaultTTL.
	TTL time.Duration
	// Renew is the interval between keepalives, > 0 and < TTL − Margin; 0 means
	// DefaultRenew. After a failure the next attempt comes after Renew/2; each attempt is
	// given at most Renew.
	Renew time.Duration
	// Margin is how much earlier than TTL the Worker stops issuing, > 0 and < TTL; 0 means
	// DefaultMargin.
	Margin time.Duration
	// MarkAhead is how far ahead of the clock each keepalive raises the high-water mark,
	// > 0; 0 means DefaultMarkAhead. A graceful successor may wait up to this long.
	MarkAhead time.Duration
	// StoreTimeout bounds a high-water Store that must reach etcd; 0 means
	// DefaultStoreTimeout.
	StoreTimeout time.Duration
	// MaxMarkWait is the longest Claim waits for the clock to pass a claimed ID's stored mark;
	// a mark further ahead makes Claim free that ID and take another. 0 means
	// DefaultMaxMarkWait.
	MaxMarkWait time.Duration
	// ClaimWait is how long Claim keeps trying while every ID of the range is held; 0 means
	// TTL + 2 s; negative means fail at once.
	ClaimWait time.Duration
	// MaxPeerClockSkew is the largest allowed offset of the local clock from the mean of the
	// live holders' reported clocks (snowflake.CheckPeerClock); 0 turns the check off.
	MaxPeerClockSkew time.Duration
	// Clock is the local clock (pass the generator's, see lease.WithBoot): Expiry ends on its
	// readings, their wall clock (also the reports' "ts") and its boot clock, whichever ends
	// first. nil means lease.SystemClock{}.
	Clock lease.Clock
	// Logger receives claim, keepalive failure, loss and release events; nil discards them.
	Logger *slog.Logger
}

// fill applies the defaults and validates.
func (o *Options) fill() error {
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	if o.Layout == (snowflake.Layout{}) {
		o.Layout = snowflake.DefaultLayout()
	}
	if o.MaxWorker < 0 {
		o.MaxWorker = o.Layout.MaxWorker()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.TTL, DefaultTTL)
	def(&o.Renew, DefaultRenew)
	def(&o.Margin, DefaultMargin)
	def(&o.MarkAhead, DefaultMarkAhead)
	def(&o.StoreTimeout, DefaultStoreTimeout)
	def(&o.MaxMarkWait, DefaultMaxMarkWait)
	def(&o.DialTimeout, DefaultDialTimeout)
	def(&o.RequestTimeout, DefaultRequestTimeout)
	def(&o.ClaimWait, o.TTL+2*time.Second)
	if o.Clock == nil {
		o.Clock = lease.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case len(o.Endpoints) == 0:
		return fmt.Errorf("%w: no etcd endpoints", ErrOptions)
	case !strings.HasPrefix(o.Prefix, "/") || strings.HasSuffix(o.Prefix, "/"):
		return fmt.Errorf("%w: prefix %q must start with / and not end with /", ErrOptions, o.Prefix)
	case o.TTL < 2*time.Second || o.TTL > time.Hour || o.TTL%time.Second != 0:
		return fmt.Errorf("%w: TTL %v not whole seconds in [2s, 1h]", ErrOptions, o.TTL)
	case o.Margin <= 0 || o.Margin >= o.TTL:
		return fmt.Errorf("%w: margin %v not in (0, TTL %v)", ErrOptions, o.Margin, o.TTL)
	case o.Renew <= 0 || o.Renew >= o.TTL-o.Margin:
		return fmt.Errorf("%w: keepalive interval %v not in (0, TTL - margin = %v): the lease would lapse between keepalives",
			ErrOptions, o.Renew, o.TTL-o.Margin)
	case o.MarkAhead < 0 || o.StoreTimeout < 0 || o.MaxMarkWait < 0 || o.DialTimeout < 0 || o.RequestTimeout < 0:
		return fmt.Errorf("%w: negative duration", ErrOptions)
	}
	if err := o.Layout.Validate(o.wall()); err != nil {
		return fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if o.MinWorker < 0 || o.MinWorker > o.MaxWorker || o.MaxWorker > o.Layout.MaxWorker() {
		return fmt.Errorf("%w: worker ID range [%d, %d] not inside [0, %d] of the layout (--worker-id-min/--worker-id-max)",
			ErrOptions, o.MinWorker, o.MaxWorker, o.Layout.MaxWorker())
	}
	return nil
}

// wall reads the Clock's wall clock (no monotonic reading).
func (o *Options) wall() time.Time { return o.Clock.Now().Round(0) }

// tlsConfig builds the client TLS configuration from the files, nil when none is set.
func (o *Options) tlsConfig() (*tls.Config, error) {
	if o.CertFile == "" && o.KeyFile == "" && o.CAFile == "" {
		return nil, nil
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, fmt.Errorf("%w: --etcd-cert and --etcd-key go together", ErrOptions)
	}
	info := transport.TLSInfo{CertFile: o.CertFile, KeyFile: o.KeyFile, TrustedCAFile: o.CAFile}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcdworker: TLS files: %w", err)
	}
	return cfg, nil
}

// newClient connects to the cluster. The connection is made lazily by gRPC: errors of
// unreachable endpoints show up on the first request.
func newClient(o *Options) (*clientv3.Client, error) {
	tlsCfg, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   o.Endpoints,
		DialTimeout: o.DialTimeout,
		Username:    o.Username,
		Password:    o.Password,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdworker: connect to %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	return cli, nil
}

// workerKey is the claim key of id; highWaterKey its mark's key.
func workerKey(prefix string, id int64) string {
	return prefix + "/workers/" + strconv.FormatInt(id, 10)
}

func highWaterKey(prefix string, id int64) string {
	return prefix + "/highwater/" + strconv.FormatInt(id, 10)
}
