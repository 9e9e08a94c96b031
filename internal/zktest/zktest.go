// Package zktest connects tests to a real ZooKeeper and gives each test its own namespace.
//
// The server address comes from LEAF_TEST_ZK (default 127.0.0.1:2181); `bash .ci/zookeeper.sh`
// starts one. When it is unreachable, tests are skipped, or fail when CI=true. Under
// `go test -short` (`make check`) [Addr] and [StartServer] skip without trying, even when
// CI=true.
package zktest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// DefaultAddr is the ZooKeeper address used when LEAF_TEST_ZK is unset.
const DefaultAddr = "127.0.0.1:2181"

// Addr returns the test ZooKeeper's address (env LEAF_TEST_ZK, default DefaultAddr) after
// checking that it accepts TCP connections. Unreachable: t.Fatal when CI=true, else t.Skip with
// how to start one. In -short mode it skips the test without dialling.
func Addr(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("zktest: skipped in -short mode: needs ZooKeeper")
	}
	addr := os.Getenv("LEAF_TEST_ZK")
	if addr == "" {
		addr = DefaultAddr
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		msg := "ZooKeeper not reachable at " + addr + " (" + err.Error() + "); start one with `bash .ci/zookeeper.sh` or set LEAF_TEST_ZK"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	c.Close()
	return addr
}

// Name returns a fresh random leaf.name for one test, containing `-` on purpose (Leaf chokes on
// it, leaf-go must not), e.g. "leafgo-test-3f9a1c0d7e". Its tree /snowflake/<name> is deleted
// when the test ends.
func Name(t testing.TB, addr string) string {
	t.Helper()
	b := make([]byte, 5)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		t.Fatal(err)
	}
	name := "leafgo-test-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		conn := connect(t, addr)
		defer conn.Close()
		if err := DeleteTree(conn, "/snowflake/"+name); err != nil {
			t.Logf("zktest: delete /snowflake/%s: %v", name, err)
		}
	})
	return name
}

// Conn returns a connected session to addr, closed when the test ends.
func Conn(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	conn := connect(t, addr)
	t.Cleanup(conn.Close)
	return conn
}

func connect(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	quiet := zk.WithLogger(nopLogger{})
	conn, events, err := zk.Connect([]string{addr}, 10*time.Second, quiet, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("zk.Connect(%s) = %v", addr, err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn
			}
		case <-timeout:
			conn.Close()
			t.Fatalf("no ZooKeeper session with %s within 10s", addr)
		}
	}
}

// nopLogger silences go-zookeeper's connection log.
type nopLogger struct{}

// Printf implements zk.Logger and discards the line.
func (nopLogger) Printf(string, ...any) {}

// DeleteTree deletes p and everything below it; a missing p is not an error.
func DeleteTree(conn *zk.Conn, p string) error {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := DeleteTree(conn, path.Join(p, c)); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// ClosedAddr returns a loopback address on which nothing listens (a port that was just bound and
// released), for "ZooKeeper down" tests.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
