package zkworker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake/zkworker"
)

// TestClockBehindNamesSource is issue 16 item 9: a start refused because the
// clock is behind a timestamp named the ZooKeeper node as its source when
// the timestamp came from the cache file. The node here is at the clock and
// the cache file (same worker ID) an hour ahead: the refusal names the file.
func TestClockBehindNamesSource(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	conn := zktest.Conn(t, addr)
	now := time.Now()
	node := leafNode(t, conn, name, "127.0.0.1:8080", now.UnixMilli())
	o := options(t, addr, name, "8080")
	o.Clock = clocktest.New(now)
	cache := filepath.Join(o.CacheDir, name, "leafconf", "8080", "workerID.properties")
	if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
		t.Fatal(err)
	}
	ahead := now.Add(time.Hour)
	if err := os.WriteFile(cache, fmt.Appendf(nil, "workerID=0\ntimestamp=%d\n", ahead.UnixMilli()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := zkworker.Claim(context.Background(), o)
	if !errors.Is(err, zkworker.ErrClockBehind) {
		t.Fatalf("Claim() = %v, want ErrClockBehind", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "stored in "+cache) || strings.Contains(msg, "stored in "+node) {
		t.Errorf("Claim() = %q, want the cache file %s named as the timestamp's source, not the node %s", msg, cache, node)
	}
}
