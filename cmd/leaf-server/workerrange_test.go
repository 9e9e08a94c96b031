package main

import (
	"strings"
	"testing"
	"time"
)

// TestWorkerRangeFlags: --worker-id-min/--worker-id-max (and their LEAF_*
// twins) bound the sql source's claims; -1 as max is the layout's largest;
// an empty range or one outside the layout is refused with the flags named.
// --max-peer-clock-skew defaults to 10 s and refuses a negative value.
func TestWorkerRangeFlags(t *testing.T) {
	sql := []string{"--worker-id-source", "sql", "--segment-dsn", "postgres://x@127.0.0.1/db"}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		lo, hi  int64
		wantErr string
	}{
		{name: "defaults: the whole layout", args: sql, lo: 0, hi: 1023},
		{name: "a range", args: append(sql, "--worker-id-min", "512", "--worker-id-max", "767"), lo: 512, hi: 767},
		{name: "min only", args: append(sql, "--worker-id-min", "1000"), lo: 1000, hi: 1023},
		{name: "from the environment", args: sql, env: map[string]string{"LEAF_WORKER_ID_MIN": "3", "LEAF_WORKER_ID_MAX": "4"}, lo: 3, hi: 4},
		{name: "one ID", args: append(sql, "--worker-id-min", "7", "--worker-id-max", "7"), lo: 7, hi: 7},
		{name: "wider worker bits", args: append(sql, "--worker-bits", "12", "--sequence-bits", "10", "--worker-id-max", "4095"), lo: 0, hi: 4095},
		{name: "empty", args: append(sql, "--worker-id-min", "5", "--worker-id-max", "4"), wantErr: "--worker-id-min 5 / --worker-id-max 4"},
		{name: "past the layout", args: append(sql, "--worker-id-max", "1024"), wantErr: "want 0 <= min <= max <= 1023"},
		{name: "negative min", args: append(sql, "--worker-id-min", "-1"), wantErr: "--worker-id-min -1"},
		{name: "negative skew", args: append(sql, "--max-peer-clock-skew", "-1s"), wantErr: "--max-peer-clock-skew must be 0 (off) or positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := parseConfig(tt.args, env(tt.env), func(string) {})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseConfig(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseConfig(%q) = %v", tt.args, err)
			}
			lo, hi, err := l.workerRange()
			if err != nil || lo != tt.lo || hi != tt.hi {
				t.Errorf("workerRange() = %d, %d, %v, want %d, %d", lo, hi, err, tt.lo, tt.hi)
			}
			if l.MaxPeerClockSkew != 10*time.Second {
				t.Errorf("MaxPeerClockSkew = %v, want the 10 s default", l.MaxPeerClockSkew)
			}
		})
	}
}
