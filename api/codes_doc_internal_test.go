package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesDocumented: the table "Error codes of the JSON API" in
// docs/http.md lists every code this package answers, with its status, and
// no other. The codes are read from the source: a string literal right
// after an http.Status… argument (apiError calls, the failures table) or
// beside a status field (the fallbacks), and encode's "bad_"+field for
// each field its num reads.
func TestErrorCodesDocumented(t *testing.T) {
	codeRe := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	statuses := map[string]int{} // http.StatusNotFound → 404, named after the status text
	for c := 100; c < 600; c++ {
		if txt := http.StatusText(c); txt != "" {
			statuses["Status"+strings.NewReplacer(" ", "", "-", "").Replace(txt)] = c
		}
	}
	status := func(e ast.Expr) int {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" && strings.HasPrefix(sel.Sel.Name, "Status") {
				if v, ok := statuses[sel.Sel.Name]; ok {
					return v
				}
				t.Fatalf("http.%s: its name is not its status text; add it to this test", sel.Sel.Name)
			}
		}
		return 0
	}
	str := func(e ast.Expr) string {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, _ := strconv.Unquote(lit.Value)
			return s
		}
		return ""
	}
	code := map[string]int{}
	type composed struct {
		prefix string // "bad_" of "bad_"+name
		status int
		pos    token.Position
	}
	var prefixes []composed
	add := func(pos token.Position, c string, st int) {
		if old, ok := code[c]; ok && old != st {
			t.Errorf("%s: code %s answers %d here and %d elsewhere", pos, c, st, old)
		}
		code[c] = st
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	numFields := []string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			var args []ast.Expr
			switch n := n.(type) {
			case *ast.CallExpr:
				args = n.Args
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "num" && len(n.Args) > 0 {
					numFields = append(numFields, str(n.Args[0]))
				}
			case *ast.CompositeLit:
				var st int
				var c string
				for _, e := range n.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					switch k, _ := kv.Key.(*ast.Ident); {
					case k != nil && k.Name == "status":
						st = status(kv.Value)
					case k != nil && k.Name == "code":
						c = str(kv.Value)
					}
				}
				if st != 0 && codeRe.MatchString(c) {
					add(fset.Position(n.Pos()), c, st)
				}
				args = n.Elts
			}
			for i := 0; i+1 < len(args); i++ {
				st := status(args[i])
				if st == 0 {
					continue
				}
				if c := str(args[i+1]); codeRe.MatchString(c) {
					add(fset.Position(args[i+1].Pos()), c, st)
				} else if b, ok := args[i+1].(*ast.BinaryExpr); ok && b.Op == token.ADD && strings.HasSuffix(str(b.X), "_") {
					prefixes = append(prefixes, composed{str(b.X), st, fset.Position(b.Pos())})
				}
			}
			return true
		})
	}
	for _, p := range prefixes {
		if len(numFields) == 0 {
			t.Fatalf("%s: codes made as %q+field, but no num(\"field\", …) calls found: teach this test where the fields are", p.pos, p.prefix)
		}
		for _, f := range numFields {
			add(p.pos, p.prefix+f, p.status)
		}
	}
	if len(code) < 20 {
		t.Fatalf("found %d codes in the source; the parser missed them", len(code))
	}

	b, err := os.ReadFile("../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## Error codes of the JSON API\n")
	if !ok {
		t.Fatal("docs/http.md: no section ## Error codes of the JSON API")
	}
	_, table, _ = strings.Cut(table, "| --- | --- | --- |\n")
	table, _, _ = strings.Cut(table, "\n\n")
	doc := map[string]int{}
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		st, err := strconv.Atoi(cells[1])
		if len(cells) != 3 || err != nil {
			t.Fatalf("docs/http.md: error code row %q: want | codes | status | when |", row)
		}
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[0], -1) {
			doc[m[1]] = st
		}
	}
	for c, st := range code {
		if d, ok := doc[c]; !ok {
			t.Errorf("docs/http.md: error code %s (%d %s) is not in the table", c, st, http.StatusText(st))
		} else if d != st {
			t.Errorf("docs/http.md: error code %s is %d in the table; the code answers %d", c, d, st)
		}
	}
	for c := range doc {
		if _, ok := code[c]; !ok {
			t.Errorf("docs/http.md: error code %s is in the table; the code never answers it", c)
		}
	}
}
