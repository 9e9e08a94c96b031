// Package doctest reads the repository's documents from tests that check
// what the documents say against the code (the stores' retry codes, for
// one). It is imported only from tests.
package doctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Paragraph returns the paragraph of the document at path (relative to the
// repository root, which is root relative to the test's directory) that
// starts with start, with its lines joined by single spaces. A paragraph
// ends at the first blank line. It fails the test when the document cannot
// be read or no paragraph starts with start.
func Paragraph(t testing.TB, root, path, start string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), start)
	if !ok {
		t.Fatalf("%s: no paragraph starts with %q", path, start)
	}
	para, _, _ := strings.Cut(start+rest, "\n\n")
	return strings.Join(strings.Fields(para), " ")
}
