package snowflake

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocumentedStall: docs/contract.md §3.2 rule 2 gives maxStall, the
// longest a request waits for a clock that does not move (the exported
// defaults are checked by docs/facts_test.go).
func TestDocumentedStall(t *testing.T) {
	b, err := os.ReadFile("../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`a clock that stands still for (\d+) ms`).FindStringSubmatch(strings.Join(strings.Fields(string(b)), " "))
	if want := strconv.FormatInt(maxStall.Milliseconds(), 10); m == nil || m[1] != want {
		t.Errorf("docs/contract.md §3.2 rule 2: %q, want a clock that stands still for %s ms (maxStall)", m, want)
	}
}
