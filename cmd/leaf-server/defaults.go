package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"

	"github.com/leaf-go/leaf/store/dsn"
)

// Safe defaults when replicated (docs/contract.md §5 rule 8, issue 20 item 5, issue
// 23 item 4). applyDefaults runs after every source was read and before
// validate.

// leafListen is where a server started from Leaf's leaf.properties listens
// when neither the file (server.port) nor --listen says: Spring Boot's
// default, every interface on port 8080, as Leaf does.
const leafListen = ":8080"

// Sources of the values applyDefaults chooses, as --print-config shows them.
const (
	sourceLeafListen = "default for --config (Leaf listens on every interface, port 8080)"
	sourceSQLLease   = "default for a shared --segment-dsn (a lease in that database)"
)

// errNoDSN is the refusal of a server on a non-loopback address with no
// --segment-dsn: every replica would serve segments from its own SQLite file.
var errNoDSN = errors.New("no --segment-dsn on a non-loopback address")

// applyDefaults fills the settings whose default depends on others:
//   - started from leaf.properties (--config) without server.port and without
//     --listen/LEAF_LISTEN, listen on every interface, port 8080 (Leaf's);
//   - snowflake on, no worker-ID setting at all (no --worker-id-source, no
//     --worker-id) and a shared store (a PostgreSQL or MySQL --segment-dsn):
//     the worker ID is a lease in that database (source sql), never a static
//     worker 0 that every replica would share.
//
// It then refuses (errNoDSN) a server that would open the implicit SQLite
// store (no --segment-dsn) while listening on a non-loopback address. The
// message says what to set.
func (l *loaded) applyDefaults() error {
	if l.configFile != "" && l.sources["listen"] == "default" {
		l.Listen, l.sources["listen"] = leafListen, sourceLeafListen
	}
	if l.SnowflakeEnabled && l.sources["worker-id-source"] == "default" && l.sources["worker-id"] == "default" && l.sharedStore() {
		l.WorkerIDSource, l.sources["worker-id-source"] = "sql", sourceSQLLease
	}
	opensStore := l.SegmentEnabled || (l.SnowflakeEnabled && l.WorkerIDSource == "sql")
	if opensStore && l.SegmentDSN == "" && !loopback(l.Listen) {
		set := "--segment-dsn (LEAF_SEGMENT_DSN)"
		if l.configFile != "" {
			set = "leaf.jdbc.url in " + l.configFile + ", or --segment-dsn (LEAF_SEGMENT_DSN)"
		}
		return fmt.Errorf("%w: --listen %q (from %s) accepts connections from other hosts, and without a database every "+
			"server hands out segments from its own SQLite file (%s): two such servers repeat each other's IDs. "+
			"Set %s: a shared database (postgres://… or mysql://…) for several servers, or sqlite:<path> "+
			"(e.g. sqlite:/data/leaf.db) for one deliberate single server; or listen on 127.0.0.1",
			errNoDSN, l.Listen, l.sources["listen"], l.DSN(), set)
	}
	return nil
}

// sharedStore reports whether --segment-dsn names a database several servers
// share (PostgreSQL or MySQL). A malformed DSN is not shared; validate and
// the open report it.
func (l *loaded) sharedStore() bool {
	if l.SegmentDSN == "" {
		return false
	}
	c, err := dsn.Parse(l.SegmentDSN)
	return err == nil && (c.Dialect == dsn.Postgres || c.Dialect == dsn.MySQL)
}

// loopback reports whether the listen address host:port accepts connections
// from this host only: localhost or a loopback IP. An empty host (":8080")
// is every interface, and a host name other than localhost may resolve to
// anything: neither is loopback.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false // net.Listen reports the malformed address
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// envExtra are the LEAF_* variables leaf-server accepts beyond its flags'
// (LEAF_ plus the flag name, LEAF_CONFIG among them): leafctl's LEAF_SERVER,
// which an environment shared by both tools may set.
var envExtra = []string{"LEAF_SERVER"}

// envTestPrefix starts the variables of leaf-go's own test suite
// (LEAF_TEST_POSTGRES_DSN, LEAF_TEST_CLOCK_FILE, …), which the test servers
// inherit: not settings, never refused.
const envTestPrefix = "LEAF_TEST_"

// checkEnviron refuses an environment (os.Environ's KEY=value list) with a
// LEAF_* variable that is no setting, naming it and the nearest known name:
// a typo such as LEAF_SEGMENT_DNS must not silently leave the setting at its
// default (a local SQLite file instead of the shared database). Values are
// never repeated: they may hold passwords.
func checkEnviron(environ []string) error {
	var known []string
	var cfg Config
	var file string
	var print bool
	newFlagSet(&cfg, &file, &print).VisitAll(func(f *flag.Flag) { known = append(known, envName(f.Name)) })
	known = append(known, envExtra...)
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "LEAF_") || strings.HasPrefix(name, envTestPrefix) || slices.Contains(known, name) {
			continue
		}
		errs = append(errs, fmt.Errorf("unknown environment variable %s: did you mean %s? (leaf-server -h lists every setting)",
			name, nearest(name, known)))
	}
	return errors.Join(errs...)
}

// nearest returns the name of known closest to name by edit distance
// (Levenshtein); ties go to the earlier one.
func nearest(name string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		if d := levenshtein.ComputeDistance(name, k); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	return best
}
