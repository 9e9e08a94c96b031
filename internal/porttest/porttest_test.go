package porttest

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestFreeSkipsTakenPorts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	// A range of the taken port and the two after it (or before, at the top).
	low := taken
	if low > 65533 {
		low = 65533
	}
	r := NewRange(low, low+2)
	ports, err := r.Free(1)
	if err != nil {
		t.Skipf("no free port next to %d: %v", taken, err)
	}
	for _, p := range ports {
		if p == taken {
			t.Fatalf("Free returned port %d, which a listener holds", taken)
		}
		if p < low || p > low+2 {
			t.Fatalf("Free returned port %d outside %d..%d", p, low, low+2)
		}
	}
	if _, err := NewRange(taken, taken).Free(1); err == nil {
		t.Fatalf("Free(1) of the range %d..%d, whose one port is taken, gave no error", taken, taken)
	} else if want := strconv.Itoa(taken); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the range %s", err, want)
	}
}
