package docs_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestImportTable: the table of imports in architecture.md is the module's
// own, as go list reports it (tests left out): every package in one row,
// with exactly the module packages it imports.
func TestImportTable(t *testing.T) {
	const module = "github.com/leaf-go/leaf/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	want := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		pkg := strings.TrimPrefix(f[0], module)
		if pkg == "docs" {
			continue
		}
		var imps []string
		for _, imp := range f[1:] {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				imps = append(imps, rest)
			}
		}
		slices.Sort(imps)
		want[pkg] = imps
	}
	b, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| package | imports |\n| --- | --- |\n")
	if !ok {
		t.Fatal("architecture.md: no table | package | imports |")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	span := regexp.MustCompile("`([^`]+)`")
	seen := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) != 2 {
			t.Fatalf("architecture.md: import table row %q: want two cells", row)
		}
		var imps []string
		for _, m := range span.FindAllStringSubmatch(cells[1], -1) {
			imps = append(imps, m[1])
		}
		slices.Sort(imps)
		for _, m := range span.FindAllStringSubmatch(cells[0], -1) {
			pkg := m[1]
			got, ok := want[pkg]
			switch {
			case !ok:
				t.Errorf("architecture.md: %s is no package of the module", pkg)
			case seen[pkg]:
				t.Errorf("architecture.md: %s is in two rows", pkg)
			case !slices.Equal(got, imps):
				t.Errorf("architecture.md: %s imports %v; the table says %v", pkg, got, imps)
			}
			seen[pkg] = true
		}
	}
	for pkg := range want {
		if !seen[pkg] {
			t.Errorf("architecture.md: the import table lacks %s (imports %v)", pkg, want[pkg])
		}
	}
}
