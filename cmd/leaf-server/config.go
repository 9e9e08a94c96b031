package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/k8sworker"
	"github.com/leaf-go/leaf/store/dsn"
)

// Config is every setting of leaf-server. It starts from DefaultConfig, then
// LEAF_* environment variables, then flags (flag > env > default).
type Config struct {
	// Listen is the HTTP address, host:port. Default 127.0.0.1:8080; with
	// --config, :8080 (every interface, as Leaf) unless the file has
	// server.port. A non-loopback address needs SegmentDSN (defaults.go).
	Listen string
	// SegmentEnabled turns segment mode on. Default true.
	SegmentEnabled bool
	// SegmentDSN names the leaf_alloc store: sqlite:<path>, postgres://…,
	// mysql://user:pass@tcp(host:port)/db. Empty means sqlite:<DataDir>/leaf.db,
	// refused on a non-loopback Listen (defaults.go).
	SegmentDSN string
	// Migrate applies the embedded goose migrations at start. Default true.
	Migrate bool
	// DataDir holds the SQLite file and local state. Default ./data. One
	// server per DataDir: run locks <DataDir>/LOCK and refuses to start when
	// another process holds it.
	DataDir string
	// SnowflakeEnabled turns snowflake mode on. Default true.
	SnowflakeEnabled bool
	// WorkerIDSource is where the snowflake worker ID comes from: static
	// (WorkerID), zookeeper (Leaf's node layout under ZK) or sql (a lease in the
	// segment store). Default static, except sql when SegmentDSN is a
	// PostgreSQL or MySQL database and neither this nor WorkerID was set
	// (defaults.go).
	WorkerIDSource string
	// WorkerID is the static worker ID, 0..1023. Default 0. Two live servers
	// with the same static worker ID issue duplicate IDs: keeping it unique
	// (e.g. a StatefulSet ordinal) is the operator's job.
	WorkerID int64
	// WorkerIDMin and WorkerIDMax bound the worker IDs a lease source (sql,
	// etcd) claims, inclusive, so that clusters sharing a layout but not a
	// coordinator get disjoint IDs. Defaults 0 and -1 (-1: the layout's
	// largest). A range outside the layout is refused at start.
	WorkerIDMin int64
	WorkerIDMax int64
	// MaxPeerClockSkew is the largest offset of this host's clock from the
	// mean of the live peers' reported clocks at start (zookeeper, etcd, sql
	// sources); more refuses the start, naming the peers. Default 10 s
	// (Twitter snowflake's rule); 0 turns the check off.
	MaxPeerClockSkew time.Duration
	// EpochMillis is the snowflake epoch, Unix ms; default 1288834974657
	// (Twitter's and Leaf's). It must lie in the past.
	EpochMillis int64
	// TimeBits, WorkerBits and SequenceBits are the snowflake layout's field
	// widths; they sum to at most 63 (53 keeps every ID exact in a
	// JavaScript number), and the layout must last at least a year
	// (snowflake.MinRunway). Default 41/10/12 (Leaf, Twitter).
	TimeBits, WorkerBits, SequenceBits int
	// RandomStart starts each millisecond's sequence at a random value in
	// [0, 100), as Leaf does so that callers sharding on the last digits of
	// low-traffic IDs spread evenly. Default true.
	RandomStart bool
	// ZK is the ZooKeeper ensemble for --worker-id-source zookeeper,
	// host:port[,host:port…] (Leaf's leaf.snowflake.zk.address).
	ZK string
	// LeafName is Leaf's leaf.name: the namespace /snowflake/<leaf-name>/ in
	// ZooKeeper. Default com.sankuai.leaf.opensource.test (Leaf's sample).
	LeafName string
	// AdvertiseIP is the IP registered in ZooKeeper; empty means the first
	// non-loopback IPv4 address, as Leaf does.
	AdvertiseIP string
	// SnowflakePort is the port label registered with the IP (Leaf's
	// leaf.snowflake.port); empty means the port of Listen.
	SnowflakePort string
	// ZKCacheStart turns on Leaf's cache-file start (--zk-cache-start): with
	// ZooKeeper unreachable at start, serve the worker ID cached in Leaf's
	// workerID.properties without ZooKeeper's word that nobody else holds it
	// (a same-identity replacement, or a newcomer after ZooKeeper lost its
	// data, can hold it meanwhile: their IDs repeat until this server reaches
	// ZooKeeper, registers and stops on the conflict). Off by default: the
	// server fails closed, answering snowflake requests with an error until a
	// claim succeeds (zkworker.Options.CacheStart).
	ZKCacheStart bool
	// The etcd worker-ID source.

	// EtcdEndpoints is the etcd cluster for --worker-id-source etcd,
	// host:port[,host:port…].
	EtcdEndpoints string
	// EtcdPrefix is the etcd key prefix; empty means /leaf-go/<leaf-name>.
	EtcdPrefix string
	// EtcdUsername and EtcdPassword authenticate to etcd when the username is
	// set; the password is never printed.
	EtcdUsername, EtcdPassword string
	// EtcdCert, EtcdKey and EtcdCACert are PEM files for TLS to etcd: a
	// client certificate and key (mutual TLS) and the CA bundle; any of them
	// turns TLS on.
	EtcdCert, EtcdKey, EtcdCACert string
	// The kubernetes worker-ID source (the API server from the pod's service
	// account, or KUBECONFIG; the namespace from POD_NAMESPACE).

	// KubernetesLeasePrefix starts the name of every worker ID's Lease
	// (<prefix><id>); empty means <leaf-name>-worker-, the leaf name
	// lower-cased with characters a name cannot hold as '-'.
	KubernetesLeasePrefix string
	// KubernetesLeaseDuration is each Lease's duration, whole seconds in
	// [3 s, 1 h]; renewals every fifth of it, issuing stops 2 s before it.
	// Default 15 s.
	KubernetesLeaseDuration time.Duration
	// WaitTimeout bounds how long a request waits for a segment load in flight
	// before answering -3. Default 1 s.
	WaitTimeout time.Duration
	// RefreshInterval is how often the biz_tag list is re-read. Default 60 s.
	RefreshInterval time.Duration
	// MarksCompactBytes is the size, in bytes, below which the high-water
	// marks log (<DataDir>/segment-marks.log) is never compacted; past it
	// and past twice the size of one record per tag, it is. Default 1 MiB;
	// at least 1. Small values are for tests that want compactions often.
	MarksCompactBytes int64
	// MetricsTopTags is the number of tags with the lowest runway, and of
	// tags with the highest consumption rate, that get per-tag series on
	// /metrics once there are more than MetricsAllTagsMax tags
	// ([api.TagMetrics.Top]). Default 50; 0 means none.
	MetricsTopTags int
	// MetricsTags is a comma-separated list of biz_tag patterns whose tags
	// always get per-tag series: "prefix*" or a path.Match glob
	// ([api.TagMetrics.Patterns]). Default empty.
	MetricsTags string
	// MetricsAllTagsMax is the largest number of tags for which every tag
	// gets per-tag series ([api.TagMetrics.AllMax]). Default 200; 0 means
	// never (only the chosen tags).
	MetricsAllTagsMax int
	// ShutdownTimeout bounds the graceful drain on SIGTERM, and then again
	// the tail return. Default 10 s.
	ShutdownTimeout time.Duration
	// ReturnTail gives the unused tail of every plain tag back on a
	// graceful stop (SIGTERM), and lets this server take in the tails
	// other servers gave back (segment.Config.Tails; docs/contract.md §2.6 rule 9).
	// A tail comes back only when no one allocated the tag after this
	// server. Default true.
	ReturnTail bool
	// DemoTag inserts Leaf's sample row leaf-segment-test (max_id 1, step
	// 2000) when leaf_alloc is empty. Default true.
	DemoTag bool
	// AdminToken enables the admin API (/api/v1/admin/…) with this bearer
	// token; empty (the default) leaves those routes out. Never logged.
	AdminToken string
	// PprofListen, when set, serves Go's net/http/pprof profiles under
	// /debug/pprof/ on this host:port, a listener of its own so that the
	// profiles never share the public port. Empty (the default) is off.
	// `make pgo` reads the CPU profile from here.
	PprofListen string
	// LogFormat is text or json. Default text.
	LogFormat string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
}

// DefaultConfig returns the settings used when nothing is configured: the
// embedded SQLite store under ./data with segment mode on.
func DefaultConfig() Config {
	return Config{
		Listen:           "127.0.0.1:8080",
		SegmentEnabled:   true,
		SnowflakeEnabled: true,
		WorkerIDSource:   "static",
		LeafName:         "com.sankuai.leaf.opensource.test",
		MaxPeerClockSkew: 10 * time.Second,

		KubernetesLeaseDuration: k8sworker.DefaultLeaseDuration,
		EpochMillis:             snowflake.DefaultEpochMillis,
		TimeBits:                41,
		WorkerBits:              10,
		SequenceBits:            12,
		RandomStart:             true,
		Migrate:                 true,
		DataDir:                 "./data",
		WaitTimeout:             time.Second,
		WorkerIDMax:             -1,
		RefreshInterval:         time.Minute,
		MarksCompactBytes:       segment.DefaultCompactBytes,
		MetricsTopTags:          api.DefaultMetricsTopTags,
		MetricsAllTagsMax:       api.DefaultMetricsAllTagsMax,
		ShutdownTimeout:         10 * time.Second,
		ReturnTail:              true,
		DemoTag:                 true,
		LogFormat:               "text",
		LogLevel:                "info",
	}
}

// DSN returns the effective segment DSN: SegmentDSN, or the SQLite file in
// DataDir when it is empty.
func (c Config) DSN() string {
	if c.SegmentDSN != "" {
		return c.SegmentDSN
	}
	return "sqlite:" + filepath.Join(c.DataDir, "leaf.db")
}

// errHelp is returned by parseConfig when -h was asked for; run exits 0.
var errHelp = flag.ErrHelp

// loaded is a parsed Config with where each value came from.
type loaded struct {
	Config
	// sources maps a flag name to the source of its value: default, file
	// <path> (<key>), env <NAME> or flag.
	sources map[string]string
	// warnings are unknown keys and dropped options, to be logged at start.
	warnings []string
	// configFile is the leaf.properties path given by --config, if any.
	configFile string
	// print asks run to print the effective config and exit.
	print bool
	// version asks run to print the build (internal/buildinfo) and exit;
	// nothing else is read or checked.
	version bool
}

// docs/configuration.md is generated from newFlagSet (configdoc_test.go).
//go:generate go test -run ^TestConfigurationDoc$ . -args -update-docs

// newFlagSet binds every setting of cfg to a flag.
func newFlagSet(cfg *Config, configFile *string, print *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("leaf-server", flag.ContinueOnError)
	fs.SetOutput(discard{})
	fs.StringVar(configFile, "config", *configFile, "Leaf leaf.properties file to read (keys leaf.name, leaf.segment.enable, leaf.jdbc.*, leaf.snowflake.*, server.port)")
	fs.BoolVar(print, "print-config", false, "print the effective configuration with the source of every value, then exit")
	fs.Bool("version", false, "print the version, commit and Go version, then exit")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "HTTP listen address host:port (with --config: :8080 unless server.port; a non-loopback address needs --segment-dsn)")
	fs.BoolVar(&cfg.SegmentEnabled, "segment", cfg.SegmentEnabled, "enable segment mode")
	fs.StringVar(&cfg.SegmentDSN, "segment-dsn", cfg.SegmentDSN, "leaf_alloc store: sqlite:<path>, postgres://…, mysql://user:pass@tcp(host:port)/db (default sqlite:<data-dir>/leaf.db)")
	fs.BoolVar(&cfg.Migrate, "migrate", cfg.Migrate, "apply the embedded migrations at start")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for the SQLite file and local state (one server per dir: locked at start)")
	fs.BoolVar(&cfg.SnowflakeEnabled, "snowflake", cfg.SnowflakeEnabled, "enable snowflake mode")
	fs.StringVar(&cfg.WorkerIDSource, "worker-id-source", cfg.WorkerIDSource, "snowflake worker ID source: static, zookeeper, sql (a lease in the --segment-dsn database), etcd (a lease in --etcd-endpoints) or kubernetes (a coordination.k8s.io/v1 Lease per worker ID); unset: sql with a PostgreSQL or MySQL --segment-dsn and no --worker-id, else static")
	fs.Int64Var(&cfg.EpochMillis, "epoch-ms", cfg.EpochMillis, "snowflake epoch in Unix ms (default Twitter's and Leaf's)")
	fs.IntVar(&cfg.TimeBits, "time-bits", cfg.TimeBits, "snowflake time field width; time+worker+sequence bits at most 63 (53: IDs exact in JavaScript); the layout must last a year")
	fs.IntVar(&cfg.WorkerBits, "worker-bits", cfg.WorkerBits, "snowflake worker ID field width")
	fs.IntVar(&cfg.SequenceBits, "sequence-bits", cfg.SequenceBits, "snowflake sequence field width")
	fs.BoolVar(&cfg.RandomStart, "random-start", cfg.RandomStart, "start each millisecond's sequence at a random value below 100, as Leaf does")
	fs.StringVar(&cfg.ZK, "zk", cfg.ZK, "ZooKeeper address(es) host:port[,host:port] for --worker-id-source zookeeper")
	fs.StringVar(&cfg.LeafName, "leaf-name", cfg.LeafName, "Leaf's leaf.name: ZooKeeper namespace /snowflake/<leaf-name>")
	fs.StringVar(&cfg.AdvertiseIP, "advertise-ip", cfg.AdvertiseIP, "IP registered in ZooKeeper (default: first non-loopback IPv4)")
	fs.StringVar(&cfg.SnowflakePort, "snowflake-port", cfg.SnowflakePort, "port label registered in ZooKeeper (default: the --listen port)")
	fs.BoolVar(&cfg.ZKCacheStart, "zk-cache-start", cfg.ZKCacheStart, "with ZooKeeper unreachable at start, serve the worker ID of Leaf's cache file (RISK: a replacement on the same ip:port, or a newcomer after ZooKeeper lost its data, may hold it meanwhile and their IDs repeat until this server reaches ZooKeeper); off: snowflake fails closed until ZooKeeper answers")
	fs.Int64Var(&cfg.WorkerIDMin, "worker-id-min", cfg.WorkerIDMin, "lowest worker ID the sql, etcd and kubernetes sources claim")
	fs.Int64Var(&cfg.WorkerIDMax, "worker-id-max", cfg.WorkerIDMax, "highest worker ID the sql, etcd and kubernetes sources claim (-1: the layout's largest)")
	fs.DurationVar(&cfg.MaxPeerClockSkew, "max-peer-clock-skew", cfg.MaxPeerClockSkew, "refuse to start when this host's clock is off the mean of the live peers' clocks by more (zookeeper, etcd, sql sources; 0 = off)")
	fs.StringVar(&cfg.EtcdEndpoints, "etcd-endpoints", cfg.EtcdEndpoints, "etcd client addresses host:port[,host:port] for --worker-id-source etcd")
	fs.StringVar(&cfg.EtcdPrefix, "etcd-prefix", cfg.EtcdPrefix, "etcd key prefix (default /leaf-go/<leaf-name>)")
	fs.StringVar(&cfg.EtcdUsername, "etcd-username", cfg.EtcdUsername, "etcd user (authentication off when empty)")
	fs.StringVar(&cfg.EtcdPassword, "etcd-password", cfg.EtcdPassword, "etcd password (never printed)")
	fs.StringVar(&cfg.EtcdCert, "etcd-cert", cfg.EtcdCert, "client certificate PEM file for TLS to etcd (with --etcd-key)")
	fs.StringVar(&cfg.EtcdKey, "etcd-key", cfg.EtcdKey, "client key PEM file for TLS to etcd")
	fs.StringVar(&cfg.EtcdCACert, "etcd-cacert", cfg.EtcdCACert, "CA bundle PEM file that signed the etcd servers' certificates")
	fs.StringVar(&cfg.KubernetesLeasePrefix, "kubernetes-lease-prefix", cfg.KubernetesLeasePrefix, "name prefix of the worker IDs' Leases for --worker-id-source kubernetes (default <leaf-name>-worker-)")
	fs.DurationVar(&cfg.KubernetesLeaseDuration, "kubernetes-lease-duration", cfg.KubernetesLeaseDuration, "duration of each worker ID's Lease for --worker-id-source kubernetes (whole seconds, 3s..1h)")
	fs.Int64Var(&cfg.WorkerID, "worker-id", cfg.WorkerID, "static snowflake worker ID 0..1023 (unique per live server: your responsibility)")
	fs.StringVar(&cfg.AdminToken, "admin-token", cfg.AdminToken, "bearer token for /api/v1/admin (admin API off when empty)")
	fs.StringVar(&cfg.PprofListen, "pprof-listen", cfg.PprofListen, "serve net/http/pprof on this host:port (off when empty; keep it private)")
	fs.DurationVar(&cfg.WaitTimeout, "wait-timeout", cfg.WaitTimeout, "longest wait for a segment load before answering -3, and for a store of the snowflake time high-water mark before answering -4; also bounds the admin API's database calls")
	fs.DurationVar(&cfg.RefreshInterval, "refresh-interval", cfg.RefreshInterval, "how often the biz_tag list is re-read")
	fs.Int64Var(&cfg.MarksCompactBytes, "marks-compact-bytes", cfg.MarksCompactBytes, "size in bytes below which the high-water marks log is never compacted")
	fs.IntVar(&cfg.MetricsTopTags, "metrics-top-tags", cfg.MetricsTopTags, "past --metrics-all-tags-max tags, /metrics has per-tag series for this many tags with the lowest runway and this many with the highest rate (0 = none)")
	fs.StringVar(&cfg.MetricsTags, "metrics-tags", cfg.MetricsTags, "comma-separated biz_tag patterns (prefix* or path.Match globs) that always get per-tag series on /metrics")
	fs.IntVar(&cfg.MetricsAllTagsMax, "metrics-all-tags-max", cfg.MetricsAllTagsMax, "every tag gets per-tag series on /metrics while there are at most this many tags (0 = never)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "longest graceful drain on SIGTERM")
	fs.BoolVar(&cfg.ReturnTail, "return-tail", cfg.ReturnTail, "on SIGTERM give each tag's unused buffered IDs back to leaf_alloc (a compare-and-set: only when no one allocated after this server)")
	fs.BoolVar(&cfg.DemoTag, "demo-tag", cfg.DemoTag, "insert Leaf's sample tag leaf-segment-test when leaf_alloc is empty")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "log format: text or json")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "log level: debug, info, warn, error")
	return fs
}

// parseConfig fills a Config from, in rising precedence: DefaultConfig, a
// Leaf leaf.properties file (--config or LEAF_CONFIG), the LEAF_* variable of
// every flag (LEAF_ plus the flag name upper-cased with - as _, e.g.
// LEAF_SEGMENT_DSN), and the flags themselves.
func parseConfig(args []string, getenv func(string) string, usage func(string)) (loaded, error) {
	// First pass: only to learn --config and whether -h was asked for.
	var probe Config
	var probeFile string
	var probePrint bool
	pfs := newFlagSet(&probe, &probeFile, &probePrint)
	explainValues(pfs)
	if err := checkFlagNames(pfs, args); err != nil {
		return loaded{}, err
	}
	if err := pfs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			d := DefaultConfig()
			var f string
			var p bool
			usage(flagUsage(newFlagSet(&d, &f, &p)))
		}
		return loaded{}, err
	}
	if pfs.NArg() > 0 {
		return loaded{}, fmt.Errorf("unexpected arguments %q", pfs.Args())
	}
	if pfs.Lookup("version").Value.String() == "true" {
		return loaded{version: true}, nil
	}
	if probeFile == "" {
		probeFile = getenv("LEAF_CONFIG")
	}

	l := loaded{Config: DefaultConfig(), sources: map[string]string{}, configFile: probeFile}
	var ignoredFile string
	fs := newFlagSet(&l.Config, &ignoredFile, &l.print)
	explainValues(fs)
	fs.VisitAll(func(f *flag.Flag) { l.sources[f.Name] = "default" })
	var errs []error
	if l.configFile != "" {
		settings, warnings, err := readLeafProperties(l.configFile)
		if err != nil {
			return l, err
		}
		l.warnings = warnings
		for _, st := range settings {
			if err := fs.Set(st.flag, st.value); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", l.configFile, st.key, err))
			}
			l.sources[st.flag] = "file " + l.configFile + " (" + st.key + ")"
		}
	}
	// Environment next, so that flags parsed afterwards win.
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" {
			return
		}
		name := envName(f.Name)
		if v := getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				shown := strconv.Quote(v)
				if secretFlags[f.Name] {
					shown = "<hidden>"
				}
				errs = append(errs, fmt.Errorf("%s=%s: %w", name, shown, err))
			}
			l.sources[f.Name] = "env " + name
		}
	})
	if err := errors.Join(errs...); err != nil {
		return l, err
	}
	if err := fs.Parse(args); err != nil {
		return l, err
	}
	// Visit on fs would also list what Set changed; pfs saw only the args.
	pfs.Visit(func(f *flag.Flag) { l.sources[f.Name] = "flag" })
	if l.configFile != "" && l.sources["config"] == "default" {
		l.sources["config"] = "env LEAF_CONFIG"
	}
	if err := l.applyDefaults(); err != nil { // defaults.go
		return l, err
	}
	return l, l.Config.validate()
}

// secretFlags are never printed or logged in clear.
var secretFlags = map[string]bool{"admin-token": true, "etcd-password": true}

// printConfig writes every setting, its value (secrets hidden) and source.
func (l loaded) printConfig(w io.Writer) {
	fs := newFlagSet(&l.Config, &l.configFile, &l.print)
	width := 0 // the longest flag name, so that the values line up
	fs.VisitAll(func(f *flag.Flag) { width = max(width, len(f.Name)) })
	fs.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		switch {
		case f.Name == "print-config":
			return
		case secretFlags[f.Name] && v != "":
			v = "<hidden>"
		case f.Name == "segment-dsn":
			v = dsn.Redact(l.DSN())
		}
		_, _ = fmt.Fprintf(w, "%-*s %-45s %s\n", width, f.Name, v, l.sources[f.Name])
	})
}

func (c Config) validate() error {
	var errs []error
	if c.WaitTimeout <= 0 {
		errs = append(errs, errors.New("--wait-timeout must be positive"))
	}
	if c.RefreshInterval < time.Second {
		errs = append(errs, errors.New("--refresh-interval must be at least 1s"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if c.MaxPeerClockSkew < 0 {
		errs = append(errs, errors.New("--max-peer-clock-skew must be 0 (off) or positive"))
	}
	if c.MarksCompactBytes < 1 {
		errs = append(errs, errors.New("--marks-compact-bytes must be at least 1"))
	}
	if c.MetricsTopTags < 0 {
		errs = append(errs, errors.New("--metrics-top-tags must be 0 (none) or positive"))
	}
	if c.MetricsAllTagsMax < 0 {
		errs = append(errs, errors.New("--metrics-all-tags-max must be 0 (never) or positive"))
	}
	if _, err := api.ParseTagPatterns(c.MetricsTags); err != nil {
		errs = append(errs, fmt.Errorf("--metrics-tags: %w", err))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel))
	}
	if c.SnowflakeEnabled {
		l := c.Layout()
		now := time.Now()
		if err := l.Validate(now); err != nil {
			errs = append(errs, fmt.Errorf("--epoch-ms/--time-bits/--worker-bits/--sequence-bits: %w", err))
		} else if err := l.CheckRunway(now); err != nil {
			errs = append(errs, fmt.Errorf("--epoch-ms/--time-bits: %w", err))
		}
		switch c.WorkerIDSource {
		case "static":
			if c.WorkerID < 0 || (l.WorkerBits > 0 && l.WorkerBits < 63 && c.WorkerID > l.MaxWorker()) {
				errs = append(errs, fmt.Errorf("--worker-id %d: want 0..%d", c.WorkerID, l.MaxWorker()))
			}
		case "zookeeper":
			if c.ZK == "" {
				errs = append(errs, errors.New("--worker-id-source zookeeper needs --zk host:port"))
			}
			if c.LeafName == "" || strings.Contains(c.LeafName, "/") {
				errs = append(errs, fmt.Errorf("--leaf-name %q: want a non-empty name without /", c.LeafName))
			}
		case "sql":
			// The lease table lives in the --segment-dsn store.
		case "etcd":
			if c.EtcdEndpoints == "" {
				errs = append(errs, errors.New("--worker-id-source etcd needs --etcd-endpoints host:port[,host:port]"))
			}
			if p := c.etcdPrefix(); !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
				errs = append(errs, fmt.Errorf("--etcd-prefix %q: want a key prefix starting with / and not ending with /", p))
			}
		case "kubernetes":
			d := c.KubernetesLeaseDuration
			if d < 3*time.Second || d > time.Hour || d%time.Second != 0 {
				errs = append(errs, fmt.Errorf("--kubernetes-lease-duration %v: want whole seconds in [3s, 1h]", d))
			}
			if p := c.kubernetesLeasePrefix(); !k8sLeaseName.MatchString(p+"0") || len(p) > 230 {
				errs = append(errs, fmt.Errorf("--kubernetes-lease-prefix %q: <prefix><worker ID> must be a Lease name: lower-case letters, digits, '-' and '.'", p))
			}
		default:
			errs = append(errs, fmt.Errorf("--worker-id-source %q: want static, zookeeper, sql, etcd or kubernetes", c.WorkerIDSource))
		}
		if _, _, err := c.workerRange(); err != nil {
			errs = append(errs, err)
		}
	}
	if !c.SegmentEnabled && !c.SnowflakeEnabled {
		errs = append(errs, errors.New("both modes are disabled: enable --segment or --snowflake"))
	}
	return errors.Join(errs...)
}

// tagMetrics is the /metrics tag selection of the --metrics-* flags. The
// flags' 0 (none, never) is api.TagMetrics' negative; the patterns were
// checked by validate.
func (c Config) tagMetrics() api.TagMetrics {
	tm := api.TagMetrics{Top: c.MetricsTopTags, AllMax: c.MetricsAllTagsMax}
	tm.Patterns, _ = api.ParseTagPatterns(c.MetricsTags)
	if tm.Top == 0 {
		tm.Top = -1
	}
	if tm.AllMax == 0 {
		tm.AllMax = -1
	}
	return tm
}

// etcdPrefix is the effective etcd key prefix: EtcdPrefix, or
// /leaf-go/<leaf-name> when it is empty.
func (c Config) etcdPrefix() string {
	if c.EtcdPrefix != "" {
		return c.EtcdPrefix
	}
	return "/leaf-go/" + c.LeafName
}

// k8sLeaseName is what a Lease name (a DNS subdomain) may look like.
var k8sLeaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// kubernetesLeasePrefix is the effective Lease name prefix:
// KubernetesLeasePrefix, or k8sworker.DefaultPrefix of the leaf name.
func (c Config) kubernetesLeasePrefix() string {
	if c.KubernetesLeasePrefix != "" {
		return c.KubernetesLeasePrefix
	}
	return k8sworker.DefaultPrefix(c.LeafName)
}

// Layout is the snowflake bit layout of c.
func (c Config) Layout() snowflake.Layout {
	return snowflake.Layout{
		Epoch:        time.UnixMilli(c.EpochMillis).UTC(),
		TimeBits:     c.TimeBits,
		WorkerBits:   c.WorkerBits,
		SequenceBits: c.SequenceBits,
	}
}

// envName maps a flag name to its environment variable: segment-dsn → LEAF_SEGMENT_DSN.
func envName(flagName string) string {
	return "LEAF_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func flagUsage(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("Usage: leaf-server [flags]\n\nEvery flag can also be set as LEAF_<NAME> (e.g. LEAF_SEGMENT_DSN); flags win.\n\n")
	fs.VisitAll(func(f *flag.Flag) {
		env := "env " + envName(f.Name) + ", "
		if f.Name == "version" { // read from the arguments only
			env = ""
		}
		fmt.Fprintf(&b, "  --%s (%sdefault %q)\n      %s\n", f.Name, env, f.DefValue, f.Usage)
	})
	return b.String()
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
