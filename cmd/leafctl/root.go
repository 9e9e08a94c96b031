package main

import (
	"context"
	"fmt"
	"io"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaf-go/leaf/internal/buildinfo"
)

// Defaults of the global flags, overridden by LEAF_SEGMENT_DSN and LEAF_SERVER.
const (
	defaultDSN     = "sqlite:./data/leaf.db"
	defaultServer  = "http://127.0.0.1:8080"
	defaultTimeout = 10 * time.Second
)

// env is what the commands may touch of the outside world, so that tests run
// them in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// interactive reports whether stdin is a terminal a person answers
	// prompts on.
	interactive bool
	// now is the clock of the audit log; nil means time.Now.
	now func() time.Time
	// user names the operator in the audit log; nil means the OS user.
	user func() string
}

// globals are the persistent flags, resolved against the environment before
// a command runs.
type globals struct {
	dsn     string
	server  string
	timeout time.Duration
}

// docs/leafctl.md is generated from newRoot (refdoc_test.go).
//go:generate go test -run ^TestReferenceDoc$ . -args -update-docs

// newRoot builds the command tree; every command writes through e.
func newRoot(e env) *cobra.Command {
	if e.now == nil {
		e.now = time.Now
	}
	if e.user == nil {
		e.user = osUser
	}
	g := &globals{}
	root := &cobra.Command{
		Use:   "leafctl",
		Short: "Administer and load-test a leaf-go ID service",
		Long: `leafctl administers a leaf-go (or Meituan Leaf) installation.

The database commands (migrate, tag) work on the leaf_alloc table named by
--dsn; bench talks to a running server at --server; decode and encode need
neither.

Exit codes: 0 success, 1 failure, 2 bad usage, 3 bench saw a duplicate ID.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		Args:              cobra.ArbitraryArgs,
		RunE:              groupRunE,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Version:           buildinfo.Read().String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.resolve(cmd, e.getenv)
		},
	}
	root.SetVersionTemplate("leafctl {{.Version}}\n")
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef("%w (see %s --help)", explainFlagError(cmd, err), cmd.CommandPath())
	})
	pf := root.PersistentFlags()
	pf.StringVar(&g.dsn, "dsn", defaultDSN, "leaf_alloc database: sqlite:<path>, postgres://user:pass@host:5432/db, mysql://user:pass@tcp(host:3306)/db (env LEAF_SEGMENT_DSN)")
	pf.StringVar(&g.server, "server", defaultServer, "base URL of a running leaf-server, for bench (env LEAF_SERVER)")
	pf.DurationVar(&g.timeout, "timeout", defaultTimeout, "limit for the database work of one command, or for one bench HTTP request")

	root.AddCommand(newMigrateCmd(e, g), newTagCmd(e, g), newDecodeCmd(e), newEncodeCmd(e), newBenchCmd(e, g), newHealthCmd(e, g))
	return root
}

// resolve fills flags the user did not set from the environment and checks
// them.
func (g *globals) resolve(cmd *cobra.Command, getenv func(string) string) error {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if v := getenv("LEAF_SEGMENT_DSN"); v != "" && !cmd.Flags().Changed("dsn") {
		g.dsn = v
	}
	if v := getenv("LEAF_SERVER"); v != "" && !cmd.Flags().Changed("server") {
		g.server = v
	}
	if g.timeout <= 0 {
		return usagef("--timeout must be positive, got %v", g.timeout)
	}
	return nil
}

// groupRunE runs a command that only groups subcommands: without arguments
// it shows the help and fails, with one it names the unknown subcommand.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		_ = cmd.Help()
		return usagef("missing command (see %s --help)", cmd.CommandPath())
	}
	return usagef("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
}

// exactArgs is cobra.ExactArgs with a usage error naming the arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s, got %d argument(s) (see %s --help)", cmd.CommandPath(), names, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// osUser names the operator for the audit log: the OS user name, or the
// numeric ID when it cannot be looked up.
func osUser() string {
	u, err := user.Current()
	if err != nil {
		return "unknown"
	}
	if u.Username != "" {
		return u.Username
	}
	return u.Uid
}

// withTimeout bounds the database work of one command by --timeout.
func (g *globals) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.timeout)
}

// fprintf writes to w, ignoring errors: output goes to a terminal or pipe,
// and a broken pipe is not worth a second error.
func fprintf(w io.Writer, format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }

// required is a usage error naming the first of the flags that was not given.
// (cobra's MarkFlagRequired fails with an error that is not a usageError.)
func required(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if !cmd.Flags().Changed(n) {
			return usagef("required flag --%s not set (see %s --help)", n, cmd.CommandPath())
		}
	}
	return nil
}
