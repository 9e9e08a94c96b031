package zkworker_test

import (
	"testing"

	"github.com/leaf-go/leaf/internal/zktest"
)

// TestParentsHoldZeroBytes: the parents Claim creates (/snowflake/<leaf-name> and its forever
// node) hold 0 bytes of data, as Curator's creatingParentsIfNeeded writes them for Java Leaf
// (as recorded from Leaf 1.0.1 against ZooKeeper), not null. go-zookeeper reads null as a nil slice
// and 0 bytes as an empty one, so the two can be told apart from here.
func TestParentsHoldZeroBytes(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	name := zktest.Name(t, addr)
	claim(t, options(t, addr, name, "8080"))
	conn := zktest.Conn(t, addr)
	for _, p := range []string{"/snowflake/" + name, "/snowflake/" + name + "/forever"} {
		data, st, err := conn.Get(p)
		if err != nil {
			t.Fatalf("Get(%q): %v", p, err)
		}
		if data == nil || len(data) != 0 || st.DataLength != 0 {
			t.Errorf("Get(%q) = %q (nil %t, dataLength %d), want 0 bytes, not null", p, data, data == nil, st.DataLength)
		}
	}
}
