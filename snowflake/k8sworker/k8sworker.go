// Package k8sworker is the `kubernetes` worker-ID source: a snowflake worker ID held as a
// coordination.k8s.io/v1 Lease in the pod's namespace (k8s.io/client-go), the object
// Kubernetes' own leader election uses. Its Worker is a snowflake.Source. A team on
// Kubernetes then needs no ZooKeeper, etcd or lease table of its own, and a Role on leases in
// one namespace is all the permission it needs (get, list, create, update).
//
// One Lease per worker ID, named <Prefix><id> (leaf-server: <leaf-name>-worker-<id>):
//
//	spec.holderIdentity        the holder: POD_NAME (or the hostname) plus a per-process
//	                           unique part, so that a same-named replacement pod never
//	                           mistakes a live lease for its own; "" once released
//	spec.leaseDurationSeconds  Options.LeaseDuration
//	spec.renewTime             the holder's clock at its last renewal
//	annotation leaf-go/high-water-ms
//	                           the worker ID's time high-water mark, decimal Unix ms; it stays
//	                           on the Lease after release, for the next holder
//
// Rules that keep IDs unique:
//
//  1. Claim: the preferred ID (the StatefulSet ordinal plus MinWorker) is tried first, then
//     the lowest ID of [MinWorker, MaxWorker] whose Lease is missing, released, or not
//     renewed for LeaseDuration by the renewTime it shows. The Lease is taken by a create
//     (missing) or an update carrying the resourceVersion that was read (the API server's
//     optimistic concurrency): two claimers cannot both win one Lease.
//  2. The lease policy is snowflake/lease's, shared with every coordinated source: stop
//     issuing at the local instant read just before the last confirmed renewal was sent plus
//     LeaseDuration − Margin, on the monotonic, wall and boot clocks, so a paused or
//     suspended process cannot issue past it.
//  3. The time high-water mark is written into the Lease with every renewal, MarkAhead past
//     the clock, under the same resourceVersion precondition, so the generator's Store rarely
//     waits on the API server. Every ID of a holder is below the mark it last wrote, and the
//     next holder's take-over write reads the Lease after that write; the next holder waits
//     until its clock has passed the mark (at most MaxMarkWait; a mark further ahead makes
//     Claim take another ID), so the two never share a millisecond, even if the old holder
//     wakes up and issues before it notices. A claim that finds no mark (a Lease never
//     created, or deleted by hand, whose holder may still be issuing) is held back for
//     LeaseDuration + Margin (lease.Config.NoHistory): /readyz says why meanwhile.
//  4. A lost lease is final for that claim: a renewal answered 404 (the Lease deleted) or 409
//     with another holder (taken over) closes Lost, and Ready reports it for good. A renewal
//     that fails otherwise (the API server away) only lets Expiry pass; the next successful
//     renewal resumes issuing, since no claimer can have written in between.
//  5. Close stops issuing, writes the generator's own last mark and releases the Lease
//     (holderIdentity ""); the next holder takes it at once and waits only for the mark.
package k8sworker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/lease"
)

// Defaults for zero Options fields: a lease of tens of seconds, renewed five times within it.
const (
	// DefaultLeaseDuration is the Lease's spec.leaseDurationSeconds.
	DefaultLeaseDuration = 15 * time.Second
	// DefaultRenew is the interval between renewals.
	DefaultRenew = 3 * time.Second
	// DefaultMargin is how much earlier than LeaseDuration the Worker stops issuing: it
	// covers clock-rate differences and the travel of a renewal.
	DefaultMargin = 2 * time.Second
	// DefaultMarkAhead is how far ahead of the clock each renewal raises the high-water
	// mark: LeaseDuration − Margin (the longest the generator issues after the last
	// successful renewal) plus the generator's window (3 s) plus 1 s.
	DefaultMarkAhead = 17 * time.Second
	// DefaultStoreTimeout bounds a high-water Store that must reach the API server.
	DefaultStoreTimeout = time.Second
	// DefaultMaxMarkWait is the longest Claim waits for the clock to pass a Lease's mark.
	DefaultMaxMarkWait = 20 * time.Second
	// DefaultRequestTimeout bounds each API request of Claim.
	DefaultRequestTimeout = 5 * time.Second
)

// MarkAnnotation is the Lease annotation holding the worker ID's time high-water mark,
// decimal Unix ms.
const MarkAnnotation = "leaf-go/high-water-ms"

// serviceAccountNamespace is where Kubernetes mounts the pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

var (
	// ErrOptions is returned by Claim for Options outside their documented ranges.
	ErrOptions = errors.New("k8sworker: invalid options")
	// ErrNoFreeWorker is returned (wrapped) by Claim when every worker ID of the range has a
	// live holder, or a high-water mark too far ahead.
	ErrNoFreeWorker = errors.New("k8sworker: no free worker ID")
	// ErrLost is returned (wrapped, with lease.ErrLeaseLost) by Store once the Lease was
	// deleted or taken over: final.
	ErrLost = errors.New("k8sworker: worker ID lease lost")
	// ErrClosed is returned by Store after Close.
	ErrClosed = errors.New("k8sworker: closed")
)

// Options configure Claim. Zero fields take the defaults.
type Options struct {
	// Client talks to the API server; required ([NewClient] on [Config]'s configuration).
	Client *Client
	// Namespace holds the Leases; required ([Namespace] finds the pod's).
	Namespace string
	// Prefix starts every Lease name: <Prefix><worker ID>. Required; with the ID appended
	// it must be a valid object name (lower-case letters, digits, '-' and '.').
	Prefix string
	// Identity is this process's holder identity, unique per process; "" means
	// [Identity](os.Getenv).
	Identity string
	// Preferred is the worker ID tried first (the StatefulSet ordinal plus MinWorker), or
	// -1 for none; an ID outside [MinWorker, MaxWorker] is ignored.
	Preferred int64
	// Layout is the snowflake layout the worker ID is for; zero means
	// snowflake.DefaultLayout().
	Layout snowflake.Layout
	// MinWorker and MaxWorker bound the claimed worker IDs, 0 ≤ MinWorker ≤ MaxWorker ≤
	// Layout.MaxWorker(); MaxWorker < 0 means Layout.MaxWorker(). One range per cluster or
	// region keeps clusters that issue into the same tables apart.
	MinWorker, MaxWorker int64
	// LeaseDuration is the Lease's duration, whole seconds, 2 s..1 h; 0 means
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// Renew is the interval between renewals, > 0 and < LeaseDuration − Margin; 0 means
	// DefaultRenew. After a failure the next attempt comes after Renew/2.
	Renew time.Duration
	// Margin is how much earlier than LeaseDuration the Worker stops issuing, > 0 and <
	// LeaseDuration; 0 means DefaultMargin.
	Margin time.Duration
	// MarkAhead is how far ahead of the clock each renewal raises the mark, > 0; 0 means
	// DefaultMarkAhead.
	MarkAhead time.Duration
	// StoreTimeout bounds a Store that must reach the API server; 0 means
	// DefaultStoreTimeout.
	StoreTimeout time.Duration
	// MaxMarkWait is the longest Claim waits for the clock to pass a Lease's mark; 0 means
	// DefaultMaxMarkWait.
	MaxMarkWait time.Duration
	// RequestTimeout bounds each API request of Claim; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Clock is the local clock (pass the generator's, see lease.WithBoot): Expiry ends on its
	// readings, its wall clock and its boot clock; renewTime is its wall clock. nil means
	// lease.SystemClock{}.
	Clock lease.Clock
	// Logger receives claim, renewal failure, loss and release events; nil discards them.
	Logger *slog.Logger
}

// nameRe is what a Lease name (a DNS subdomain) may look like.
var nameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// fill applies the defaults and validates.
func (o *Options) fill() error {
	if o.Identity == "" {
		o.Identity = Identity(os.Getenv)
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
	def(&o.LeaseDuration, DefaultLeaseDuration)
	def(&o.Renew, DefaultRenew)
	def(&o.Margin, DefaultMargin)
	def(&o.MarkAhead, DefaultMarkAhead)
	def(&o.StoreTimeout, DefaultStoreTimeout)
	def(&o.MaxMarkWait, DefaultMaxMarkWait)
	def(&o.RequestTimeout, DefaultRequestTimeout)
	if o.Clock == nil {
		o.Clock = lease.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Client == nil:
		return fmt.Errorf("%w: no Kubernetes client", ErrOptions)
	case o.Namespace == "":
		return fmt.Errorf("%w: no namespace", ErrOptions)
	case !nameRe.MatchString(o.Prefix+"0") || len(o.Prefix)+20 > 253:
		return fmt.Errorf("%w: lease name prefix %q: <prefix><worker ID> must be a lower-case DNS subdomain name (a-z, 0-9, '-', '.')", ErrOptions, o.Prefix)
	case o.LeaseDuration < 2*time.Second || o.LeaseDuration > time.Hour || o.LeaseDuration%time.Second != 0:
		return fmt.Errorf("%w: lease duration %v not whole seconds in [2s, 1h]", ErrOptions, o.LeaseDuration)
	case o.Margin <= 0 || o.Margin >= o.LeaseDuration:
		return fmt.Errorf("%w: margin %v not in (0, lease duration %v)", ErrOptions, o.Margin, o.LeaseDuration)
	case o.Renew <= 0 || o.Renew >= o.LeaseDuration-o.Margin:
		return fmt.Errorf("%w: renew interval %v not in (0, lease duration - margin = %v): the lease would lapse between renewals",
			ErrOptions, o.Renew, o.LeaseDuration-o.Margin)
	case o.MarkAhead < 0 || o.StoreTimeout < 0 || o.MaxMarkWait < 0 || o.RequestTimeout < 0:
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

// policy is the lease timing of o.
func (o *Options) policy() lease.Policy {
	return lease.Policy{TTL: o.LeaseDuration, Renew: o.Renew, Margin: o.Margin}
}

// Config returns the client configuration client-go's conventions give: the pod's service
// account inside a cluster (rest.InClusterConfig), else the kubeconfig files named by
// KUBECONFIG, else ~/.kube/config (clientcmd's loading rules). getenv reads the environment.
func Config(getenv func(string) string) (*rest.Config, error) {
	if getenv("KUBERNETES_SERVICE_HOST") != "" && getenv("KUBECONFIG") == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("k8sworker: in-cluster config: %w", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kc := getenv("KUBECONFIG"); kc != "" {
		rules.Precedence = strings.Split(kc, string(os.PathListSeparator))
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("k8sworker: no in-cluster service account and no usable kubeconfig (KUBECONFIG): %w", err)
	}
	return cfg, nil
}

// Namespace returns the namespace for the Leases: POD_NAMESPACE (the downward API), else the
// service account's namespace file, else the current context's namespace of a kubeconfig
// named by KUBECONFIG, else "default".
func Namespace(getenv func(string) string) string {
	if ns := getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	if kc := getenv("KUBECONFIG"); kc != "" {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: strings.Split(kc, string(os.PathListSeparator))}
		if ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace(); err == nil && ns != "" {
			return ns
		}
	}
	return "default"
}

// Identity returns a holder identity for this process: POD_NAME (else the hostname), "_" and
// 8 random hex digits, so that a same-named replacement pod has another identity.
func Identity(getenv func(string) string) string {
	name := getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return name + "_" + hex.EncodeToString(b[:])
}

// Preferred returns the worker ID a pod prefers: POD_INDEX (the downward API's
// apps.kubernetes.io/pod-index label), else the trailing ordinal of POD_NAME (leaf-go-3 →
// 3), plus min; -1 when neither gives a number.
func Preferred(getenv func(string) string, min int64) int64 {
	if s := getenv("POD_INDEX"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
			return min + n
		}
	}
	name := getenv("POD_NAME")
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		if n, err := strconv.ParseInt(name[i+1:], 10, 64); err == nil && n >= 0 {
			return min + n
		}
	}
	return -1
}

// DefaultPrefix derives the Lease name prefix from Leaf's leaf.name: lower-cased, every
// character a Lease name cannot hold replaced by '-', then "-worker-"
// (com.sankuai.leaf.opensource.test → com.sankuai.leaf.opensource.test-worker-).
func DefaultPrefix(leafName string) string {
	b := []byte(strings.ToLower(leafName))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-.")
	if s == "" {
		s = "leaf"
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s + "-worker-"
}

// leaseName is the Lease of worker ID id.
func leaseName(prefix string, id int64) string { return prefix + strconv.FormatInt(id, 10) }
