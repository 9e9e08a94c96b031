package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/leaf-go/leaf/store"
)

// ErrNodeRefused is returned (wrapped, with the host and the reason) by
// Open and Store.Start, and by new connections, when a server must not take
// allocations: it is read-only (@@read_only, @@super_read_only, TiDB's @@tidb_super_read_only or
// @@tidb_restricted_read_only), or it is a Galera node that is not ready
// (wsrep_ready=OFF) or not part of the primary component
// (wsrep_cluster_status other than Primary). With a multi-host DSN the next
// host is tried (docs/contract.md §8).
var ErrNodeRefused = errors.New("mysql: node refused")

// errNoHost is returned by a connection attempt when no host of the DSN
// accepted it; it wraps each host's error.
var errNoHost = errors.New("mysql: no host accepted the connection")

// SplitHosts splits a go-sql-driver DSN whose TCP address lists several
// hosts, user:pass@tcp(h1:3306,h2:3306,h3)/db: it returns the DSN with the
// first host only and every host with its port (3306 where none is given).
// A DSN naming one host or none comes back unchanged, with addrs nil.
// Errors: an empty host in the list.
func SplitHosts(dsn string) (first string, addrs []string, err error) {
	start, end, ok := addrSpan(dsn)
	if !ok || !strings.Contains(dsn[start:end], ",") {
		return dsn, nil, nil
	}
	for _, h := range strings.Split(dsn[start:end], ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return "", nil, errors.New("mysql: empty host in the tcp(…) address list")
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "3306")
		}
		addrs = append(addrs, h)
	}
	return dsn[:start] + addrs[0] + dsn[end:], addrs, nil
}

// JoinHosts returns dsn, a go-sql-driver DSN with one TCP host, with that
// host replaced by the list addrs (as SplitHosts returned it). With fewer
// than two addrs it returns dsn unchanged.
func JoinHosts(dsn string, addrs []string) string {
	start, end, ok := addrSpan(dsn)
	if !ok || len(addrs) < 2 {
		return dsn
	}
	return dsn[:start] + strings.Join(addrs, ",") + dsn[end:]
}

// addrSpan finds the address inside net(…) of a go-sql-driver DSN the way
// its ParseDSN does: the last '/', the last '@' before it, then the first
// '(' after that, up to the ')' just before the '/'.
func addrSpan(dsn string) (start, end int, ok bool) {
	slash := strings.LastIndexByte(dsn, '/')
	if slash <= 0 || dsn[slash-1] != ')' {
		return 0, 0, false
	}
	at := strings.LastIndexByte(dsn[:slash], '@')
	open := strings.IndexByte(dsn[at+1:slash], '(')
	if open < 0 {
		return 0, 0, false
	}
	return at + 1 + open + 1, slash - 1, true
}

// hostConnector is a driver.Connector over several hosts: each new
// connection goes to the first host, in DSN order, that accepts it and passes
// checkNode. A host that died is thus skipped until it answers again, and
// connections return to the first host as the pool recycles them
// (connMaxLifetime).
type hostConnector struct {
	addrs []string
	conns []driver.Connector // one per addrs entry
	gate  *store.Gate        // nil: connect whenever asked
}

// Connect implements driver.Connector. While the gate is closed it fails
// with the gate's error, before any host is tried.
func (h *hostConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := checkGate(h.gate); err != nil {
		return nil, err
	}
	var errs []error
	for i, c := range h.conns {
		conn, err := c.Connect(ctx)
		if err == nil {
			if err = checkNode(ctx, conn); err == nil {
				return conn, nil
			}
			_ = conn.Close() // refused node: the check's error is what counts
		}
		errs = append(errs, fmt.Errorf("%s: %w", h.addrs[i], err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: %w", errNoHost, errors.Join(errs...))
}

// Driver implements driver.Connector.
func (h *hostConnector) Driver() driver.Driver { return h.conns[0].Driver() }

// nodeConnector is a driver.Connector for one host that checks each new
// connection with checkNode.
type nodeConnector struct {
	addr string
	gate *store.Gate // nil: connect whenever asked
	driver.Connector
}

// Connect implements driver.Connector. While the gate is closed it fails
// with the gate's error, before the host is dialled.
func (n nodeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := checkGate(n.gate); err != nil {
		return nil, err
	}
	conn, err := n.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkNode(ctx, conn); err != nil {
		_ = conn.Close() // refused node: the check's error is what counts
		return nil, fmt.Errorf("%s: %w", n.addr, err)
	}
	return conn, nil
}

// checkGate returns the error of a closed gate; nil for an open one or
// none.
func checkGate(g *store.Gate) error {
	if g == nil {
		return nil
	}
	return g.Check()
}

// checkNode refuses a connection to a server that must not take
// allocations ([ErrNodeRefused]). Two statements per new connection: the
// pool keeps connections for connMaxLifetime.
func checkNode(ctx context.Context, conn driver.Conn) error {
	vars, err := showValues(ctx, conn, `SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'super_read_only', 'tidb_super_read_only', 'tidb_restricted_read_only', 'wsrep_on')`)
	if err != nil {
		return err
	}
	for _, v := range []string{"read_only", "super_read_only", "tidb_super_read_only", "tidb_restricted_read_only"} {
		if on(vars[v]) {
			return fmt.Errorf("%w: @@%s is ON (a replica or a fenced primary; point the DSN at a writable node)", ErrNodeRefused, v)
		}
	}
	if !on(vars["wsrep_on"]) {
		return nil
	}
	st, err := showValues(ctx, conn, `SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_cluster_status')`)
	if err != nil {
		return err
	}
	if !on(st["wsrep_ready"]) {
		return fmt.Errorf("%w: Galera wsrep_ready is %s (the node is not synced with the cluster)", ErrNodeRefused, orNone(st["wsrep_ready"]))
	}
	if s := st["wsrep_cluster_status"]; !strings.EqualFold(s, "Primary") {
		return fmt.Errorf("%w: Galera wsrep_cluster_status is %s, not Primary (the node lost quorum)", ErrNodeRefused, orNone(s))
	}
	return nil
}

func on(v string) bool { return strings.EqualFold(v, "ON") || v == "1" }

func orNone(v string) string {
	if v == "" {
		return "absent"
	}
	return v
}

// showValues runs a SHOW … VARIABLES/STATUS statement on a raw driver
// connection and returns its name → value pairs.
func showValues(ctx context.Context, conn driver.Conn, query string) (map[string]string, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return nil, errors.New("mysql: driver connection cannot run queries")
	}
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return nil, fmt.Errorf("check node: %w", err)
	}
	defer func() { _ = rows.Close() }() // read to the end below; Next reports read errors
	m := map[string]string{}
	dest := make([]driver.Value, len(rows.Columns()))
	for {
		err := rows.Next(dest)
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("check node: %w", err)
		}
		if len(dest) >= 2 {
			m[strings.ToLower(text(dest[0]))] = text(dest[1])
		}
	}
}

func text(v driver.Value) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}
