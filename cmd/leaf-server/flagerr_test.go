package main

import (
	"strings"
	"testing"
	"time"
)

// TestFlagErrorsSayWhatToDo: a value of the wrong form names the flag (or
// variable) and the form expected; an unknown flag names the nearest known
// one (issue 23 item 5). Each case failed with the old messages ("parse
// error", "flag provided but not defined").
func TestFlagErrorsSayWhatToDo(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"bare number for a duration", []string{"--wait-timeout", "5"}, nil,
			[]string{"-wait-timeout", "a duration such as 5s", "did you mean 5s?"}},
		{"word for a duration", []string{"--shutdown-timeout=soon"}, nil,
			[]string{"-shutdown-timeout", "a duration such as 5s"}},
		{"duration in the environment", nil, map[string]string{"LEAF_WAIT_TIMEOUT": "5"},
			[]string{"LEAF_WAIT_TIMEOUT", "a duration such as 5s", "did you mean 5s?"}},
		{"word for an integer", []string{"--worker-id", "seven"}, nil,
			[]string{"-worker-id", "a whole number such as 10"}},
		{"integer in the environment", nil, map[string]string{"LEAF_WORKER_ID": "seven"},
			[]string{"LEAF_WORKER_ID", "a whole number"}},
		{"word for a boolean", []string{"--segment=yes"}, nil,
			[]string{"-segment", "true or false"}},
		{"misspelt flag", []string{"--wiat-timeout", "5s"}, nil,
			[]string{"unknown flag --wiat-timeout", "did you mean --wait-timeout?"}},
		{"misspelt flag with a value", []string{"--segment-dns=postgres://x"}, nil,
			[]string{"unknown flag --segment-dns", "did you mean --segment-dsn?"}},
		{"single dash", []string{"-lisen", "127.0.0.1:1"}, nil,
			[]string{"unknown flag --lisen", "did you mean --listen?"}},
		{"after a good flag and its value", []string{"--listen", "127.0.0.1:1", "--snowflak=false"}, nil,
			[]string{"unknown flag --snowflak", "did you mean --snowflake?"}},
		{"after a bare boolean", []string{"--segment", "--migrat=false"}, nil,
			[]string{"unknown flag --migrat", "did you mean --migrate?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, env(tt.env), func(string) {})
			if err == nil {
				t.Fatalf("parseConfig(%q, %v) = nil error, want one saying %q", tt.args, tt.env, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("parseConfig(%q, %v) error = %q, want it to say %q", tt.args, tt.env, err, w)
				}
			}
		})
	}
}

// TestCheckFlagNamesReadsLikeParse: what the flag package accepts passes
// checkFlagNames, values that look like flags included.
func TestCheckFlagNamesReadsLikeParse(t *testing.T) {
	tests := [][]string{
		nil,
		{"--listen", "127.0.0.1:1", "--segment", "--snowflake=false"},
		{"--admin-token", "--not-a-flag-but-a-token"},
		{"-h"},
		{"--help"},
		{"--", "--anything"},
		{"serve", "--anything"}, // Parse stops at the first argument (then: unexpected arguments)
	}
	for _, args := range tests {
		var cfg Config
		var file string
		var print bool
		fs := newFlagSet(&cfg, &file, &print)
		explainValues(fs)
		if err := checkFlagNames(fs, args); err != nil {
			t.Errorf("checkFlagNames(%q) = %v, want nil", args, err)
		}
	}
}

// TestExplainValuesKeepsValues: the wrapped flags parse good values as
// before, and a bare boolean flag still means true.
func TestExplainValuesKeepsValues(t *testing.T) {
	l, err := parseConfig([]string{"--wait-timeout", "250ms", "--worker-id", "7", "--segment", "--snowflake=false"}, env(nil), func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if l.WaitTimeout != 250*time.Millisecond || l.WorkerID != 7 || !l.SegmentEnabled || l.SnowflakeEnabled {
		t.Errorf("parseConfig = wait %v, worker %d, segment %v, snowflake %v; want 250ms, 7, true, false",
			l.WaitTimeout, l.WorkerID, l.SegmentEnabled, l.SnowflakeEnabled)
	}
}
