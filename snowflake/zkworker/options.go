package zkworker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

// Defaults used by Claim for zero Options fields.
const (
	// DefaultConnectTimeout is how long Claim waits for a ZooKeeper session before it falls back
	// to the cache file: 10 s, Leaf's Curator connectionTimeoutMs.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultSessionTimeout is the ZooKeeper session timeout: 6 s, Leaf's sessionTimeoutMs.
	DefaultSessionTimeout = 6 * time.Second
	// DefaultMargin is how much earlier than the session timeout a holder without news from
	// ZooKeeper stops issuing, and how much longer than it a replacement waits: 2 s (as the
	// etcd source's), which covers clock-rate differences and scheduling delays.
	DefaultMargin = 2 * time.Second
	// DefaultHeartbeatInterval is how often the node's timestamp is uploaded: 3 s, as Leaf.
	DefaultHeartbeatInterval = 3 * time.Second
	// DefaultStartWait is the longest Claim waits for the clock to pass a stored timestamp before
	// it fails: the generator's default high-water window plus 1 s.
	DefaultStartWait = snowflake.DefaultHighWaterWindow + time.Second
)

// Options configure Claim.
type Options struct {
	// Servers are the ZooKeeper addresses, host:port (Leaf's leaf.snowflake.zk.address split at
	// commas). Required.
	Servers []string
	// LeafName is Leaf's leaf.name, the namespace under /snowflake. Required; must not contain
	// `/`. May contain `-`.
	LeafName string
	// IP is the address registered in the node name and data. Empty means the first
	// non-loopback IPv4 address of an up interface, as Leaf's Utils.getIp. Claim normalises it
	// with NormaliseIP and logs a warning for a host name.
	IP string
	// Port is the port label registered with the IP (Leaf's leaf.snowflake.port). Required.
	// Together IP:Port identify this node across restarts.
	Port string
	// Layout bounds the worker ID (0..Layout.MaxWorker()); zero means snowflake.DefaultLayout().
	Layout snowflake.Layout
	// Clock reads the time for node timestamps and the start check; nil means
	// snowflake.SystemClock{}.
	Clock snowflake.Clock
	// CacheDir is the directory of Leaf's cache file; empty means os.TempDir() (Java's
	// java.io.tmpdir on Linux is /tmp too).
	CacheDir string
	// ConnectTimeout bounds the wait for a ZooKeeper session; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// SessionTimeout is the ZooKeeper session timeout; 0 means DefaultSessionTimeout.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the node's timestamp is uploaded; 0 means
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Margin is how much earlier than the session timeout a holder that has not heard from
	// ZooKeeper stops issuing (the session is the lease: ZooKeeper expires it, and deletes the
	// live node, no sooner than the session timeout after it last heard from the holder), and
	// how much longer than the session timeout a claim that may follow a live holder waits
	// before it serves. In (0, SessionTimeout); 0 means DefaultMargin.
	Margin time.Duration
	// CacheStart turns on Leaf's cache-file start: when ZooKeeper cannot be reached at Claim,
	// the worker ID of Leaf's cache file is used at once, without ZooKeeper's word that no
	// other process holds it (a replacement on the same ip:port, or a newcomer after ZooKeeper
	// lost its data, can hold it meanwhile: their IDs repeat until this server reaches
	// ZooKeeper). The worker registers its live node as soon as ZooKeeper answers and stops
	// for good on any conflict. false (the default) fails closed: Claim returns an error
	// wrapping ErrUnreachable, and leaf-server answers snowflake requests with an error until
	// a claim succeeds.
	CacheStart bool
	// StartWait is the longest Claim waits for the clock to pass the stored timestamp (a quick
	// restart finds a mark up to the high-water window ahead); 0 means DefaultStartWait, negative
	// means do not wait.
	StartWait time.Duration
	// MaxPeerClockSkew is the largest allowed difference between this host's clock and the mean
	// of the live peers' clocks at Claim (see snowflake.CheckPeerClock; Twitter snowflake's
	// 10 s rule); beyond it Claim refuses with an error wrapping snowflake.ErrPeerClockSkew that
	// names the peers. 0 (the zero value) or negative turns the check off; leaf-server passes
	// --max-peer-clock-skew, default 10 s. Not checked when the ID comes from the cache file.
	MaxPeerClockSkew time.Duration
	// Logger receives warnings (fallback to the cache, failed uploads); nil means slog.Default().
	Logger *slog.Logger
}

func (o *Options) normalise() error {
	switch {
	case len(o.Servers) == 0:
		return fmt.Errorf("%w: no ZooKeeper servers", ErrOptions)
	case o.LeafName == "" || strings.Contains(o.LeafName, "/"):
		return fmt.Errorf("%w: leaf.name %q must be non-empty and contain no '/'", ErrOptions, o.LeafName)
	case o.Port == "" || strings.ContainsAny(o.Port, "/"):
		return fmt.Errorf("%w: port %q must be non-empty and contain no '/'", ErrOptions, o.Port)
	case strings.ContainsAny(o.IP, "/"):
		return fmt.Errorf("%w: ip %q contains '/'", ErrOptions, o.IP)
	}
	if o.Layout == (snowflake.Layout{}) {
		o.Layout = snowflake.DefaultLayout()
	}
	if o.Clock == nil {
		o.Clock = snowflake.SystemClock{}
	}
	if o.CacheDir == "" {
		o.CacheDir = os.TempDir()
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	if o.SessionTimeout <= 0 || o.Margin <= 0 || o.Margin >= o.SessionTimeout {
		return fmt.Errorf("%w: margin %v not in (0, session timeout %v)", ErrOptions, o.Margin, o.SessionTimeout)
	}
	if o.StartWait == 0 {
		o.StartWait = DefaultStartWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.IP == "" {
		ip, err := firstIPv4()
		if err != nil {
			return fmt.Errorf("%w: no IP given and %v", ErrOptions, err)
		}
		o.IP = ip
	}
	ip, isIP := NormaliseIP(o.IP)
	if !isIP {
		o.Logger.Warn("zkworker: the advertised address is not an IP address; it is registered as given, so "+
			"another spelling of the same host (its IP, another name) is another identity and gets another worker ID",
			"advertise_ip", o.IP)
	}
	o.IP = ip
	return nil
}

// NormaliseIP returns the canonical spelling of an IP address, so that one host is one identity
// in the node names: brackets dropped ("[::1]" and "::1" are one address), IPv6 compressed and
// lower case as RFC 5952, an IPv4-mapped IPv6 address as plain IPv4. isIP is false when s is not
// an IP address (a host name), which is returned unchanged.
func NormaliseIP(s string) (ip string, isIP bool) {
	trimmed := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(trimmed)
	if err != nil {
		return s, false
	}
	return a.Unmap().String(), true
}

// firstIPv4 returns the first non-loopback IPv4 address of an up interface, as Leaf's
// Utils.getIp.
func firstIPv4() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 address found; set the IP to advertise")
}
