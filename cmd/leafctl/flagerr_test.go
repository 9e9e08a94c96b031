package main

import (
	"strings"
	"testing"
)

// TestFlagErrorsSayWhatToDo: an unknown flag gets the nearest flag of its
// command, a bad duration or integer the form expected, still as a usage
// error (issue 23 item 5; the old errors said neither).
func TestFlagErrorsSayWhatToDo(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want []string // in the error
	}{
		{"misspelt local flag", []string{"tag", "create", "a", "--stp", "5"},
			[]string{"unknown flag: --stp", "did you mean --step?"}},
		{"misspelt inherited flag", []string{"tag", "list", "--tiemout", "5s"},
			[]string{"unknown flag: --tiemout", "did you mean --timeout?"}},
		{"bare number for a duration", []string{"tag", "list", "--timeout", "5"},
			[]string{`"--timeout"`, "want a duration such as 5s", "did you mean 5s?"}},
		{"word for an integer", []string{"tag", "create", "a", "--step", "abc"},
			[]string{`"--step"`, "want a whole number such as 10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := leafctl(t, opts{}, tt.give...)
			if out.code != exitUsage || out.err == nil {
				t.Fatalf("leafctl %q = exit %d, %v; want exit %d", tt.give, out.code, out.err, exitUsage)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.err.Error(), w) {
					t.Errorf("leafctl %q error = %q, want it to say %q", tt.give, out.err, w)
				}
			}
		})
	}
}
