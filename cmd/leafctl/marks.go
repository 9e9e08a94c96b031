package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leaf-go/leaf/segment"
)

// errBelowMark is returned by tag create and tag fence when the new max_id
// would lie below the high-water mark of a --marks file, without --force.
var errBelowMark = errors.New("below a server's high-water mark")

// markGuard is the guard of tag create and tag fence against a row below a
// server's high-water mark, as leaf-server's admin API has (issue 16 item 8).
// leafctl talks to the database, not to the servers, so it knows a server's
// marks only from the server's segment-marks.log (or an older server's
// segment-marks.json) given with --marks (one per server that served the tag;
// the flag repeats).
type markGuard struct {
	files  []string
	force  bool
	reason string
}

// addFlags binds --marks, --force and --reason to cmd.
func (m *markGuard) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&m.files, "marks", nil, "a server's <data-dir>/segment-marks.log (or an older server's segment-marks.json): refuse a max_id below its mark for the tag (repeat for every server)")
	f.BoolVar(&m.force, "force", false, "go below a --marks high-water mark (and, for create, the tag's tombstone) anyway (needs --reason; an audit line goes to stderr)")
	f.StringVar(&m.reason, "reason", "", "why IDs below the high-water mark or tombstone cannot be handed out twice (with --force)")
}

// check refuses level (the new max_id, named flag on the command line) for
// tag when it is below the highest mark of the --marks files, unless --force
// with a --reason; a forced pass writes an audit line to stderr. Errors:
// errBelowMark, a usage error for --force without --reason, or a --marks file
// that cannot be read.
func (m *markGuard) check(ctx context.Context, e env, tag, flag string, level int64) error {
	m.reason = strings.TrimSpace(m.reason)
	if m.force && m.reason == "" {
		return usagef("--force needs --reason: say why IDs below the high-water mark cannot be handed out twice")
	}
	var mark int64
	var from string
	for _, p := range m.files {
		marks, err := segment.ReadMarksFile(ctx, p)
		if err != nil {
			return fmt.Errorf("--marks: %w", err)
		}
		if v := marks[tag]; v > mark {
			mark, from = v, p
		}
	}
	if level >= mark {
		return nil
	}
	if !m.force {
		return fmt.Errorf("%w: %s %d of tag %s is below the high-water mark %d in %s: IDs up to %d may have been handed out, "+
			"and a row below the mark hands them out again. Use %s %d or more; if you know that no ID from %d to %d was "+
			"handed out, add --force --reason '…'", errBelowMark, flag, level, show(tag), mark, from, mark-1, flag, mark, level, mark-1)
	}
	h := slog.NewTextHandler(e.stderr, nil)
	r := slog.NewRecord(e.now(), slog.LevelWarn, "audit: forced below the high-water mark", 0)
	r.AddAttrs(slog.String("user", e.user()), slog.String("tag", tag), slog.String("flag", flag),
		slog.Int64("value", level), slog.Int64("high_water", mark), slog.String("marks", from), slog.String("reason", m.reason))
	_ = h.Handle(ctx, r)
	return nil
}
