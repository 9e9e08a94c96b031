package mysql

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/store"
)

// TestRetryCause covers the codes that the local MariaDB cannot be made to
// send (Galera's 1047, TiDB's 8002, 8005, 8022, 8028, 9007 and its 1105 with
// "pessimistic lock retry limit reached", but no other 1105) and the errors
// that must never be retried.
func TestRetryCause(t *testing.T) {
	wrap := func(n uint16) error { return fmt.Errorf("allocate %q: %w", "t", &mysql.MySQLError{Number: n}) }
	tests := []struct {
		name      string
		give      error
		multiHost bool
		want      string // RetryStats key, "" for no retry
	}{
		{"nil", nil, true, ""},
		{"deadlock", wrap(1213), false, "1213"},
		{"lock wait timeout", wrap(1205), false, "1205"},
		{"galera not ready", wrap(1047), false, "1047"},
		{"tidb select for update", wrap(8002), false, "8002"},
		{"tidb stale", wrap(8005), false, "8005"},
		{"tidb commit retryable", wrap(8022), false, "8022"},
		{"tidb schema changed", wrap(8028), false, "8028"},
		{"tidb write conflict", wrap(9007), false, "9007"},
		{"tidb pessimistic lock retry limit", fmt.Errorf("claim worker ID: lock %q: %w", "l", &mysql.MySQLError{Number: 1105, Message: "pessimistic lock retry limit reached"}), false, "1105"},
		{"tidb other 1105", &mysql.MySQLError{Number: 1105, Message: "runtime error: index out of range"}, true, ""},
		{"tidb 1105 without message", wrap(1105), true, ""},
		{"other code, lock retry message", &mysql.MySQLError{Number: 1064, Message: "pessimistic lock retry limit reached"}, true, ""},
		{"duplicate key", wrap(1062), true, ""},
		{"read-only", wrap(1290), true, ""},
		{"out of range", wrap(1690), true, ""},
		{"invalid conn, one host", mysql.ErrInvalidConn, false, ""},
		{"invalid conn, several hosts", mysql.ErrInvalidConn, true, "conn"},
		{"bad conn, several hosts", driver.ErrBadConn, true, "conn"},
		{"bad conn, one host", driver.ErrBadConn, false, "conn"},
		{"net error, one host", &net.OpError{Op: "dial", Err: errors.New("refused")}, false, ""},
		{"net error, several hosts", &net.OpError{Op: "dial", Err: errors.New("refused")}, true, "conn"},
		{"no host", fmt.Errorf("%w: x", errNoHost), true, "conn"},
		{"eof", io.EOF, true, ""},
		{"other", errors.New("boom"), true, ""},
	}
	keys := make([]string, numCauses)
	for i, c := range retryCodes {
		keys[i] = fmt.Sprint(c)
	}
	keys[len(retryCodes)] = causeConn
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if i := retryCause(tt.give, tt.multiHost); i >= 0 {
				got = keys[i]
			}
			if got != tt.want {
				t.Errorf("retryCause(%v, %v) = %q, want %q", tt.give, tt.multiHost, got, tt.want)
			}
		})
	}
}

func TestRetryStatsKeys(t *testing.T) {
	var s Store
	s.retries[2].Add(3)
	got := s.RetryStats()
	if len(got) != numCauses || got["1213"] != 3 || got["conn"] != 0 {
		t.Errorf("RetryStats() = %v, want every cause, 1213 = 3", got)
	}
}

// TestRetryCounts: RetryStats summed per store.RetryCauses name, every
// name one of those.
func TestRetryCounts(t *testing.T) {
	var s Store
	for i, c := range retryCodes {
		s.retries[i].Add(uint64(c)) // a distinct count per code
	}
	s.retries[len(retryCodes)].Add(5)
	want := map[string]uint64{
		store.RetryNodeNotReady:    1047,
		store.RetryLockWaitTimeout: 1205,
		store.RetryDeadlock:        1213,
		store.RetryWriteConflict:   8002 + 8005 + 8022 + 9007 + 1105,
		store.RetrySchemaChanged:   8028,
		store.RetryConnection:      5,
	}
	if got := s.RetryCounts(); !maps.Equal(got, want) {
		t.Errorf("RetryCounts() = %v, want %v", got, want)
	}
	for name := range s.RetryCounts() {
		if !slices.Contains(store.RetryCauses(), name) {
			t.Errorf("RetryCounts() has %q, not one of store.RetryCauses()", name)
		}
	}
}

func TestSplitHosts(t *testing.T) {
	tests := []struct {
		give, wantFirst string
		wantAddrs       []string
	}{
		{"u:p@tcp(h:3306)/db", "u:p@tcp(h:3306)/db", nil},
		{"u:p@/db", "u:p@/db", nil},
		{"u:p@tcp(h1:3306,h2:3307,h3)/db?x=1", "u:p@tcp(h1:3306)/db?x=1", []string{"h1:3306", "h2:3307", "h3:3306"}},
		{"u:p,a@tcp(h1, h2)/db", "u:p,a@tcp(h1:3306)/db", []string{"h1:3306", "h2:3306"}},
		{"u:p@x@tcp([::1]:3306,[::2])/db", "u:p@x@tcp([::1]:3306)/db", []string{"[::1]:3306", "[::2]:3306"}},
		{"tcp(a,b)/db", "tcp(a:3306)/db", []string{"a:3306", "b:3306"}},
	}
	for _, tt := range tests {
		first, addrs, err := SplitHosts(tt.give)
		if err != nil || first != tt.wantFirst || fmt.Sprint(addrs) != fmt.Sprint(tt.wantAddrs) {
			t.Errorf("SplitHosts(%q) = %q, %q, %v, want %q, %q, nil", tt.give, first, addrs, err, tt.wantFirst, tt.wantAddrs)
		}
		if tt.wantAddrs != nil {
			if got := JoinHosts(first, addrs); got != JoinHosts(tt.give, addrs) {
				t.Errorf("JoinHosts(%q) = %q, want %q", first, got, JoinHosts(tt.give, addrs))
			}
		}
	}
	if _, _, err := SplitHosts("u@tcp(a,,b)/db"); err == nil {
		t.Errorf("SplitHosts(empty host) = nil error, want one")
	}
}
