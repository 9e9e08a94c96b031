// Package porttest hands out loopback TCP ports of a fixed range to the
// private test beds (internal/etcdtest, internal/k8stest), so that each
// bed keeps to ports of its own and never touches a shared server's.
package porttest

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
)

// Range is the ports [Low, High] of one test bed. It is safe for
// concurrent use; make it with [NewRange].
type Range struct {
	low, high int

	mu   sync.Mutex // guards next
	next int        // where the next scan starts
}

// NewRange returns the ports [low, high]; scans start at a point chosen by
// the process ID, so that test binaries running at once try different
// ports first.
func NewRange(low, high int) *Range {
	return &Range{low: low, high: high, next: low + os.Getpid()%(high-low+1)}
}

// Free returns n ports of the range that nobody listens on now on
// 127.0.0.1, or an error when the range has fewer. A port can still be
// taken by another process before the caller binds it.
func (r *Range) Free(n int) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ports []int
	for tries := 0; tries <= r.high-r.low && len(ports) < n; tries++ {
		p := r.next
		r.next++
		if r.next > r.high {
			r.next = r.low
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("fewer than %d free ports in %d..%d", n, r.low, r.high)
	}
	return ports, nil
}
