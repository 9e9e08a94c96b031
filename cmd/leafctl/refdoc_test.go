package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// updateDocs rewrites docs/leafctl.md instead of comparing it: go generate
// ./cmd/leafctl (root.go) runs this test with it.
var updateDocs = flag.Bool("update-docs", false, "rewrite docs/leafctl.md from the command definitions")

const refDocPath = "../../docs/leafctl.md"

// referenceDoc renders docs/leafctl.md from newRoot: every command with its
// usage line and summary, and its flags with their defaults and usage text.
func referenceDoc() string {
	var b strings.Builder
	b.WriteString(`# leafctl command reference

<!-- Generated from cmd/leafctl by go generate ./cmd/leafctl; do not edit. -->

` + "`make build`" + ` (or ` + "`make run`" + `) builds ` + "`bin/leafctl`" + ` next to ` + "`bin/leaf-server`" + `.
` + "`leafctl <command> --help`" + ` prints the same. Worked examples:
[operations.md](operations.md) and [business-numbers.md](business-numbers.md).

`)
	root := newRoot(env{getenv: func(string) string { return "" }})
	root.InitDefaultHelpFlag()
	fmt.Fprintf(&b, "%s\n\nGlobal flags (every command):\n\n", strings.TrimSpace(root.Long))
	writeFlags(&b, root.PersistentFlags())
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			fmt.Fprintf(&b, "\n## %s\n\n%s.\n\n    %s %s\n", sub.CommandPath(), sub.Short, c.CommandPath(), sub.Use)
			if sub.LocalNonPersistentFlags().HasAvailableFlags() {
				b.WriteString("\n")
				writeFlags(&b, sub.LocalNonPersistentFlags())
			}
			walk(sub)
		}
	}
	walk(root)
	return b.String()
}

func writeFlags(b *strings.Builder, fs *pflag.FlagSet) {
	b.WriteString("| flag | default | meaning |\n| --- | --- | --- |\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "[]" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(b, "| `--%s` | %s | %s |\n", f.Name, def, strings.NewReplacer("|", `\|`, "<", "&lt;").Replace(f.Usage))
	})
}

// TestReferenceDoc fails when docs/leafctl.md is not what the command
// definitions generate: after adding or changing a command or flag, run
// go generate ./cmd/leafctl and commit the file.
func TestReferenceDoc(t *testing.T) {
	want := referenceDoc()
	if *updateDocs {
		if err := os.WriteFile(refDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(refDocPath)
	if err != nil {
		t.Fatalf("%v (go generate ./cmd/leafctl writes it)", err)
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Errorf("docs/leafctl.md is stale: run go generate ./cmd/leafctl and commit it\n--- generated:\n%s", want)
	}
}
