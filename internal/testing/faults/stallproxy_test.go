package faults

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// stallProxy forwards TCP connections to upstream and, once armed, stalls
// the first connection that sends one of its markers: from then on that
// connection forwards nothing either way and is never closed, while every
// other connection, open or new, works. That is one connection black-holed
// in mid-query (a half-open TCP connection to a database that failed over,
// a NAT entry gone) — what toxiproxy cannot do: its black hole takes every
// connection, and clearing it closes the stalled ones.
type stallProxy struct {
	ln       net.Listener
	upstream string
	markers  [][]byte

	armed   atomic.Bool
	stalled chan struct{} // closed when a connection stalled

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// rowsMarkers match the tag-list read of the stores (store.Store.Rows): its
// SQL text as MySQL's text protocol and pgx's first Parse send it, and the
// name under which pgx caches the PostgreSQL statement, which is all its
// later executions on the connection send.
func rowsMarkers() [][]byte {
	// store/postgres/ordered.go's rowsQuery, byte for byte (the ordered flag
	// joined in, migration 6).
	const pgRows = "SELECT a.biz_tag, a.max_id, a.step, a.description, a.update_time, o.biz_tag IS NOT NULL\n" +
		"\tFROM leaf_alloc a LEFT JOIN leaf_ordered o ON o.biz_tag = a.biz_tag\n" +
		"\tORDER BY a.biz_tag"
	sum := sha256.Sum256([]byte(pgRows))
	return [][]byte{
		[]byte("ORDER BY a.biz_tag"),
		[]byte("stmtcache_" + hex.EncodeToString(sum[:24])),
	}
}

// startStallProxy listens on 127.0.0.1 (a free port) and forwards to
// upstream (host:port). It stops when the test ends.
func startStallProxy(t testing.TB, upstream string, markers [][]byte) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x := &stallProxy{ln: ln, upstream: upstream, markers: markers, stalled: make(chan struct{})}
	x.wg.Add(1)
	go x.accept()
	t.Cleanup(x.close)
	return x
}

// Addr is the proxy's listen address, host:port.
func (x *stallProxy) Addr() string { return x.ln.Addr().String() }

// arm makes the next connection that sends a marker stall; Stalled is
// closed when it did.
func (x *stallProxy) arm() { x.armed.Store(true) }

// Stalled is closed once an armed marker stalled a connection.
func (x *stallProxy) Stalled() <-chan struct{} { return x.stalled }

func (x *stallProxy) accept() {
	defer x.wg.Done()
	for {
		c, err := x.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", x.upstream)
		if err != nil {
			c.Close()
			continue
		}
		x.mu.Lock()
		x.conns = append(x.conns, c, u)
		x.mu.Unlock()
		var stalled atomic.Bool
		x.wg.Add(2)
		go x.pump(u, c, &stalled, true)
		go x.pump(c, u, &stalled, false)
	}
}

// pump copies from src to dst until either ends; a stalled connection's
// bytes are read and dropped (never answered; the proxy never closes it on
// its own). fromClient
// pumps look for the markers.
func (x *stallProxy) pump(dst, src net.Conn, stalled *atomic.Bool, fromClient bool) {
	defer x.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && fromClient && !stalled.Load() && x.armed.Load() {
			for _, m := range x.markers {
				if bytes.Contains(buf[:n], m) && x.armed.CompareAndSwap(true, false) {
					stalled.Store(true)
					close(x.stalled)
					break
				}
			}
		}
		if n > 0 && !stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			// Either side ended (a stalled connection's client gives up
			// with its deadline): so does the connection.
			dst.Close()
			src.Close()
			return
		}
	}
}

func (x *stallProxy) close() {
	x.ln.Close()
	x.mu.Lock()
	for _, c := range x.conns {
		c.Close()
	}
	x.mu.Unlock()
	x.wg.Wait()
}
