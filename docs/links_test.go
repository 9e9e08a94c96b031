package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// slug is GitHub's anchor for a heading: lower case, punctuation but - and _
// dropped, spaces as -.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]bool{}
	for _, m := range headingRe.FindAllStringSubmatch(string(b), -1) {
		a[slug(strings.ReplaceAll(m[1], "`", ""))] = true
	}
	return a
}

// TestLinks checks every relative link of the documents citedFiles lists
// (README.md, CONTRIBUTING.md, docs/*.md, the Kubernetes guide, the
// reports): the file exists, and a #fragment names a heading of it.
func TestLinks(t *testing.T) {
	for _, f := range citedFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRe.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: %v", f, link, err)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[frag] {
				t.Errorf("%s: link %s: no heading #%s in %s", f, link, frag, path)
			}
		}
	}
}
