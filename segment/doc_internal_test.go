package segment

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDocumentedLimits: the numbers the documents give for the miss
// lookups and ordered tags are the constants of this package (the exported
// defaults are checked by docs/facts_test.go).
func TestDocumentedLimits(t *testing.T) {
	grouped := func(n int) string { // 8192 → 8,192, as the documents write it
		s := strconv.Itoa(n)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	secs := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
	tests := []struct {
		file, re, want string
	}{
		{"contract.md", `\| miss lookups \| [^|]*\(or within (\d+) ms\)`, ms(missWindow)},
		{"contract.md", `\| miss lookups \| [^|]*at most ([\d,]+) waiting`, grouped(maxPending)},
		{"contract.md", `\| miss lookups \| [^|]*a miss remembered (\d+) s`, secs(missTTL)},
		{"contract.md", `\| miss lookups \| [^|]*remembered \d+ s, at most ([\d,]+)`, grouped(maxMisses)},
		{"contract.md", `\(or within (\d+) ms of the first\)`, ms(missWindow)},
		{"contract.md", `answers -2 from memory for (\d+) s`, secs(missTTL)},
		{"contract.md", `\(at most ([\d,]+) names are\s+remembered\)`, grouped(maxMisses)},
		{"contract.md", `While ([\d,]+) names wait for the next lookup`, grouped(maxPending)},
		{"compatibility.md", `answers -2\s+from\s+memory for (\d+) s`, secs(missTTL)},
		{"compatibility.md", `\(at most ([\d,]+) names remembered\)`, grouped(maxMisses)},
		{"compatibility.md", `While ([\d,]+) names wait`, grouped(maxPending)},
		{"contract.md", `At most ([\d,]+) IDs per\s+allocation`, grouped(maxOrderedBatch)},
	}
	for _, tt := range tests {
		b, err := os.ReadFile("../docs/" + tt.file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ") // wrapped anywhere
		matches := regexp.MustCompile(tt.re).FindAllStringSubmatch(text, -1)
		if len(matches) == 0 {
			t.Errorf("docs/%s: nothing matches %s: restate it here with the new wording", tt.file, tt.re)
		}
		for _, m := range matches {
			if m[1] != tt.want {
				t.Errorf("docs/%s: %q says %s; the code says %s", tt.file, strings.Join(strings.Fields(m[0]), " "), m[1], tt.want)
			}
		}
	}
}
