// Command leafctl administers a leaf-go (or Meituan Leaf) installation: it
// migrates the leaf_alloc schema, creates, lists, updates, deletes and fences
// segment tags directly in the database, decodes and encodes snowflake IDs,
// and load-tests a running server over HTTP.
//
//	leafctl migrate up|status                 [--dsn DSN]
//	leafctl tag create <tag> --step N [--max-id N] [--description S]
//	leafctl tag list [--json]
//	leafctl tag update <tag> [--step N] [--description S]
//	leafctl tag delete <tag> [--yes]
//	leafctl tag fence <tag> --min N
//	leafctl decode <id> [--json]
//	leafctl encode (--timestamp MS | --time RFC3339) (--worker N | --datacenter N --machine N) [--sequence N]
//	leafctl bench [--server URL] [--mode segment|snowflake] [--tag T] [--concurrency N]
//	              [--duration D | --requests N] [--batch N] [--json]
//
// --dsn defaults to $LEAF_SEGMENT_DSN, then sqlite:./data/leaf.db (the same
// formats as leaf-server's --segment-dsn); --server to $LEAF_SERVER, then
// http://127.0.0.1:8080.
//
// Exit codes: 0 success, 1 the operation failed (unknown tag, unreachable
// database, every bench request failed, …), 2 bad usage (unknown command or
// flag, bad argument), 3 bench saw a duplicate ID.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mattn/go-isatty"
)

// Exit codes of leafctl.
const (
	exitFailure   = 1 // the operation failed
	exitUsage     = 2 // bad command line
	exitDuplicate = 3 // bench saw an ID twice
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "leafctl:", err)
		os.Exit(exitCode(err))
	}
}

// run executes one leafctl command line. stdin is read only by the
// confirmation prompt of `tag delete`, and only when it is a terminal.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	interactive := false
	if f, ok := stdin.(*os.File); ok {
		interactive = isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
	}
	root := newRoot(env{
		stdin:       stdin,
		stdout:      stdout,
		stderr:      stderr,
		getenv:      getenv,
		interactive: interactive,
	})
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// usageError marks a bad command line (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

// errDuplicate is returned by bench when a server handed out an ID twice.
var errDuplicate = errors.New("duplicate IDs")

// exitCode maps an error returned by run to the process exit code.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errDuplicate):
		return exitDuplicate
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitFailure
}
