package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// updateDocs rewrites the generated documents instead of comparing them:
// go generate ./cmd/leaf-server (config.go) runs this test with it.
var updateDocs = flag.Bool("update-docs", false, "rewrite docs/configuration.md from the flag definitions")

const configDocPath = "../../docs/configuration.md"

// configurationDoc renders docs/configuration.md from newFlagSet: every flag,
// its environment variable, its default as DefaultConfig sets it and its
// usage text, so the reference cannot drift from the code.
func configurationDoc() string {
	var b strings.Builder
	b.WriteString(`# leaf-server configuration reference

<!-- Generated from cmd/leaf-server/config.go by go generate ./cmd/leaf-server; do not edit. -->

Settings come from, in rising precedence: the defaults below, a Leaf
` + "`leaf.properties`" + ` file (` + "`--config`" + `), the environment, the flags. Every flag
but ` + "`--version`" + ` is also the environment variable shown.
` + "`leaf-server --print-config`" + ` prints the effective value of every setting
and where it came from; ` + "`leaf-server -h`" + ` prints this list.
What the defaults mean for one server and for several, and how a Leaf
` + "`leaf.properties`" + ` file is read: [operations.md](operations.md).

| flag | environment | default | meaning |
| --- | --- | --- | --- |
`)
	d := DefaultConfig()
	var file string
	var print bool
	fs := newFlagSet(&d, &file, &print)
	fs.VisitAll(func(f *flag.Flag) {
		env := "`" + envName(f.Name) + "`"
		if f.Name == "version" { // read from the arguments only
			env = ""
		}
		def := ""
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, env, def, mdCell(f.Usage))
	})
	return b.String()
}

// mdCell makes text safe inside a Markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;").Replace(s)
}

// TestConfigurationDoc fails when docs/configuration.md is not what the flag
// definitions generate: after adding or changing a flag, run
// go generate ./cmd/leaf-server and commit the file.
func TestConfigurationDoc(t *testing.T) {
	want := configurationDoc()
	if *updateDocs {
		if err := os.WriteFile(configDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatalf("%v (go generate ./cmd/leaf-server writes it)", err)
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Errorf("docs/configuration.md is stale: run go generate ./cmd/leaf-server and commit it\n--- generated:\n%s", want)
	}
}
