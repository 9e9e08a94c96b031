package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// citedFiles are the documents whose citations of the code must hold:
// README.md, CONTRIBUTING.md, docs/*.md, the Kubernetes guide and the two
// reports.
func citedFiles(t *testing.T) []string {
	t.Helper()
	files := append(docFiles(t), "../CONTRIBUTING.md", "../deploy/kubernetes.md",
		"../RELIABILITY.md", "../BENCHMARKS.md", "../internal/testing/README.md")
	return files
}

// codeIndex is what the repository declares, both modules, as the
// documents cite it.
type codeIndex struct {
	tests map[string]bool            // Test…, Benchmark…, Fuzz…, Example… functions of _test.go files
	names map[string]map[string]bool // package name → Name, Type.Method, Type.Field
}

// indexCode parses every Go file under the repository root.
func indexCode(t *testing.T) codeIndex {
	t.Helper()
	idx := codeIndex{tests: map[string]bool{}, names: map[string]map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || (strings.HasPrefix(n, ".") && n != "..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(path, "_test.go")
		pkg := f.Name.Name
		if idx.names[pkg] == nil {
			idx.names[pkg] = map[string]bool{}
		}
		add := func(name string) {
			if !test {
				idx.names[pkg][name] = true
			}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					if test && regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)`).MatchString(d.Name.Name) {
						idx.tests[d.Name.Name] = true
					}
					add(d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if g, ok := typ.(*ast.IndexExpr); ok {
					typ = g.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					add(id.Name + "." + d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						add(s.Name.Name)
						var fields *ast.FieldList
						switch tt := s.Type.(type) {
						case *ast.StructType:
							fields = tt.Fields
						case *ast.InterfaceType:
							fields = tt.Methods
						}
						if fields != nil {
							for _, fl := range fields.List {
								for _, n := range fl.Names {
									add(s.Name.Name + "." + n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

var (
	codeSpanRe  = regexp.MustCompile("`([^`]+)`")
	testNameRe  = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz|Example)[A-Z0-9_][A-Za-z0-9_]*\b`)
	qualifiedRe = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z][A-Za-z0-9_]*))?$`)
	pathRe      = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*{},<>-]*)+$`)
)

// A citation is one name in a document that names something in the tree.
type citation struct {
	text string
	ok   bool   // it exists
	why  string // what is missing, when not ok
}

// cite reads the citations of text: test functions anywhere, and in code
// spans paths that start at a folder of the repository (or of the test
// module internal/testing) and package-qualified Go names of the module.
// Anything else (a route, a flag, a file at run time) is no citation.
func (idx codeIndex) cite(text string) []citation {
	var cs []citation
	for _, m := range testNameRe.FindAllStringIndex(text, -1) {
		if m[1] < len(text) && strings.ContainsRune("('", rune(text[m[1]])) {
			continue // a prefix in a -run pattern: '^TestEtcd', '^TestZooKeeper(A|B)$'
		}
		name := text[m[0]:m[1]]
		cs = append(cs, citation{name, idx.tests[name], "no such test function in any _test.go file"})
	}
	for _, m := range codeSpanRe.FindAllStringSubmatch(text, -1) {
		span := strings.Join(strings.Fields(m[1]), " ")
		dir, qualified := "", span
		if i := strings.LastIndex(span, "/"); i >= 0 {
			dir, qualified = span[:i+1], span[i+1:] // internal/zktest.Server
		}
		if q := qualifiedRe.FindStringSubmatch(qualified); q != nil && (dir == "" || pathExists("..", dir+q[1])) {
			names, ok := idx.names[q[1]]
			if !ok || q[1] == "main" {
				continue // not a package of the module: java.util…, http.Server
			}
			name := q[2]
			if q[3] != "" {
				name += "." + q[3]
			}
			if testNameRe.MatchString(name) {
				continue // a test function, checked above: api.FuzzRouter
			}
			cs = append(cs, citation{span, names[name], "package " + q[1] + " declares no " + name})
			continue
		}
		if pathRe.MatchString(span) && !strings.Contains(span, "…") && !strings.HasPrefix(span, "./") {
			first, _, _ := strings.Cut(span, "/")
			if first == ".." {
				// Relative to internal/testing (its README cites `../..`),
				// and never outside the repository: a reader of it, and
				// CI's clean clone, have nothing there.
				root, _ := filepath.Abs("..")
				p, _ := filepath.Abs(filepath.Join("../internal/testing", span))
				_, err := os.Stat(p)
				inside := p == root || strings.HasPrefix(p, root+string(filepath.Separator))
				cs = append(cs, citation{text: span, ok: inside && err == nil, why: "not a path inside the repository from internal/testing"})
				continue
			}
			c := citation{text: span, why: "no such file or folder"}
			for _, base := range []string{"..", "../internal/testing"} {
				if fi, err := os.Stat(filepath.Join(base, first)); err == nil && fi.IsDir() {
					c.ok = c.ok || pathExists(base, span)
					c.why = "no such file or folder (from the root or internal/testing)"
				}
			}
			if c.why != "no such file or folder" {
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// pathExists reports whether path (with `*`, `<name>` and `{a,b}` as
// wildcards) names something under base.
func pathExists(base, path string) bool {
	path = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(path, "*")
	alts := []string{path}
	if m := regexp.MustCompile(`\{([^}]*)\}`).FindStringSubmatchIndex(path); m != nil {
		alts = nil
		for _, a := range strings.Split(path[m[2]:m[3]], ",") {
			alts = append(alts, path[:m[0]]+a+path[m[1]:])
		}
	}
	for _, a := range alts {
		if ms, _ := filepath.Glob(filepath.Join(base, a)); len(ms) == 0 {
			return false
		}
	}
	return true
}

// TestCitations: every test function, repository path and package-qualified
// Go name the documents cite exists.
func TestCitations(t *testing.T) {
	idx := indexCode(t)
	for _, f := range citedFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range idx.cite(string(b)) {
			if !c.ok {
				t.Errorf("%s: `%s`: %s", f, c.text, c.why)
			}
		}
	}
}

// foreignFlags are flags the documents show for other programs.
var foreignFlags = []string{
	"--background", "--exec", "--oknodo", "--start", // start-stop-daemon (CONTRIBUTING.md)
	"--skip-systemctl-redirect", // pg_ctlcluster (CONTRIBUTING.md)
	"--from-literal",            // kubectl create secret (deploy/kubernetes.md)
	"--prefix",                  // etcdctl del --prefix
	"--help",                    // every program's
}

// TestFlagsExist: every --flag the documents name is a flag of leaf-server
// or leafctl (as their generated references list them) or of a program
// foreignFlags names.
func TestFlagsExist(t *testing.T) {
	known := map[string]bool{}
	for _, ref := range []string{"configuration.md", "leafctl.md"} {
		b, err := os.ReadFile(ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("(?m)^\\| `(--[a-z0-9-]+)` \\|").FindAllStringSubmatch(string(b), -1) {
			known[m[1]] = true
		}
	}
	if len(known) < 50 {
		t.Fatalf("read %d flags from configuration.md and leafctl.md, want their tables", len(known))
	}
	flagRe := regexp.MustCompile(`(?:^|[^A-Za-z0-9-])(--[a-z][a-z0-9-]*)`)
	for _, f := range append(docFiles(t), "../CONTRIBUTING.md", "../deploy/kubernetes.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagRe.FindAllStringSubmatch(string(b), -1) {
			if !known[m[1]] && !slices.Contains(foreignFlags, m[1]) {
				t.Errorf("%s: %s is no flag of leaf-server or leafctl (docs/configuration.md, docs/leafctl.md)", f, m[1])
			}
		}
	}
}

// TestContractBuilt: in the later sections of contract.md (§7 on), every
// *Built* claim cites the code or a test that shows it (and TestCitations
// checks that those exist), and every section says its status.
func TestContractBuilt(t *testing.T) {
	idx := indexCode(t)
	b, err := os.ReadFile("contract.md")
	if err != nil {
		t.Fatal(err)
	}
	_, later, ok := strings.Cut(string(b), "\n## §7 ")
	if !ok {
		t.Fatal("contract.md: no §7")
	}
	ruleStart := regexp.MustCompile(`(?m)^(?:\d+[a-z]?\. |## )`)
	builtRe := regexp.MustCompile(`\*Built[*.:]`)
	for _, sec := range strings.Split("## §7 "+later, "\n## ") {
		title, _, _ := strings.Cut(sec, "\n")
		if !strings.Contains(sec, "\nStatus: ") {
			t.Errorf("contract.md %s: no Status: line", title)
		}
		if regexp.MustCompile(`\nStatus: built`).MatchString(sec) && !anyCited(idx.cite(sec)) {
			t.Errorf("contract.md %s: status built, but it cites no test, file or Go name", title)
		}
		// Each rule, and each *Built* claim within it up to the next.
		bounds := ruleStart.FindAllStringIndex(sec, -1)
		for i, r := range bounds {
			end := len(sec)
			if i+1 < len(bounds) {
				end = bounds[i+1][0]
			}
			rule := sec[r[0]:end]
			claims := builtRe.FindAllStringIndex(rule, -1)
			for j, c := range claims {
				start, cend := c[0], len(rule)
				if j == 0 {
					start = 0 // the rule may cite its code before the first claim
				}
				if j+1 < len(claims) {
					cend = claims[j+1][0]
				}
				if !anyCited(idx.cite(rule[start:cend])) {
					first, _, _ := strings.Cut(rule, "\n")
					t.Errorf("contract.md %s, rule %q: a *Built* claim cites no test, file or Go name that exists:\n%s", title, first, rule[start:cend])
				}
			}
		}
	}
}

func anyCited(cs []citation) bool {
	for _, c := range cs {
		if c.ok {
			return true
		}
	}
	return false
}
