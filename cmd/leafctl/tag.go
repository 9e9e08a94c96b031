package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/leaf-go/leaf/store"
)

// errNotConfirmed is returned by tag delete when the operator did not answer
// yes.
var errNotConfirmed = errors.New("not deleted: not confirmed")

func newTagCmd(e env, g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tag",
		Short: "Create, list, update, delete and fence segment tags (rows of leaf_alloc)",
		Long: `Create, list, update, delete and fence segment tags: the rows of leaf_alloc
in the database of --dsn. Running servers pick up new and deleted tags on
their next refresh (60 s by default), or at once on a request for a new tag.`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(
		newTagCreateCmd(e, g),
		newTagListCmd(e, g),
		newTagUpdateCmd(e, g),
		newTagDeleteCmd(e, g),
		newTagFenceCmd(e, g),
		newTagPeriodsCmd(e, g), // tag_group.go
		newTagPruneCmd(e, g),
	)
	return cmd
}

// withStore opens the store of --dsn under --timeout, runs f and closes it.
func withStore(cmd *cobra.Command, g *globals, f func(ctx context.Context, st store.Store) error) error {
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	st, err := openStore(ctx, g.dsn)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // f's error is the one to report; Close only releases connections
	return storeHint(f(ctx, st))
}

// findRow returns the row of tag. Errors: store.ErrTagNotFound wrapped with
// the tag.
func findRow(ctx context.Context, st store.Store, tag string) (store.Row, error) {
	rows, err := st.Rows(ctx)
	if err != nil {
		return store.Row{}, err
	}
	for _, r := range rows {
		if r.BizTag == tag {
			return r, nil
		}
	}
	return store.Row{}, fmt.Errorf("tag %q: %w (see leafctl tag list)", tag, store.ErrTagNotFound)
}

// checkRow validates the fields create and update write before touching the
// database, as a usage error.
func checkRow(r store.Row) error {
	if err := store.ValidateRow(r); err != nil {
		return &usageError{err}
	}
	return nil
}

func newTagCreateCmd(e env, g *globals) *cobra.Command {
	var (
		step, maxID int64
		desc        string
		guard       markGuard
		gf          groupFlags // tag_group.go
		ordered     bool
	)
	cmd := &cobra.Command{
		Use:   "create <tag> --step N [--max-id N] [--description S] [--ordered] [--marks FILE]… [--group day --time-zone Z --format T]",
		Short: "Create a tag; its first ID is --max-id (or a date-grouped tag with --group)",
		Args:  exactArgs(1, "one tag"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := required(cmd, "step"); err != nil {
				return err
			}
			if gf.group != "" && ordered {
				return usagef("--ordered and --group do not go together: a date-grouped tag is served from buffered segments")
			}
			if gf.group != "" {
				return createGroup(cmd, e, g, args[0], step, desc, gf)
			}
			if err := gf.plainOnly(cmd); err != nil {
				return err
			}
			r := store.Row{BizTag: args[0], MaxID: maxID, Step: step, Description: desc, Ordered: ordered}
			if maxID < 1 {
				return usagef("--max-id must be at least 1, got %d", maxID)
			}
			if err := checkRow(r); err != nil {
				return err
			}
			if err := guard.check(cmd.Context(), e, r.BizTag, "--max-id", r.MaxID); err != nil {
				return err
			}
			return withStore(cmd, g, func(ctx context.Context, st store.Store) error {
				if err := checkPlainName(ctx, st, r.BizTag); err != nil {
					return err
				}
				if err := createRow(ctx, e, st, r, guard); err != nil {
					if errors.Is(err, store.ErrTagExists) {
						return fmt.Errorf("%w (change it with leafctl tag update, or fence it with leafctl tag fence)", err)
					}
					return err
				}
				kind := "tag"
				if r.Ordered {
					kind = "ordered tag"
				}
				fprintf(e.stdout, "created %s %s: max_id %d, step %d; its first ID will be %d\n", kind, show(r.BizTag), r.MaxID, r.Step, r.MaxID)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&step, "step", 0, fmt.Sprintf("IDs per database allocation, 1..%d (required; Leaf's sample uses 2000)", store.MaxStep))
	f.Int64Var(&maxID, "max-id", 1, "the first ID the tag will hand out (max_id of the new row), at least 1")
	f.StringVar(&desc, "description", "", fmt.Sprintf("free text, at most %d characters", store.MaxDescriptionLen))
	f.BoolVar(&ordered, "ordered", false, "IDs increase in real time across every server (no local buffer: one database write per batch of concurrent requests; docs/contract.md §12)")
	guard.addFlags(cmd)
	gf.add(cmd)
	return cmd
}

// createRow creates r: with --force (and its --reason, checked by
// guard.check) past the tag's tombstone too, writing an audit line to stderr
// when it overrode one. Errors: st.Create's (a *store.TombstoneError below
// the tombstone, with what to do) or st.ForceCreate's.
func createRow(ctx context.Context, e env, st store.Store, r store.Row, guard markGuard) error {
	if !guard.force {
		err := st.Create(ctx, r)
		if errors.Is(err, store.ErrBelowTombstone) {
			return fmt.Errorf("%w (with --force --reason '…' if you know it)", err)
		}
		return err
	}
	overrode, err := st.ForceCreate(ctx, r)
	if err != nil || overrode == 0 {
		return err
	}
	h := slog.NewTextHandler(e.stderr, nil)
	rec := slog.NewRecord(e.now(), slog.LevelWarn, "audit: forced below the tombstone", 0)
	rec.AddAttrs(slog.String("user", e.user()), slog.String("tag", r.BizTag), slog.Int64("max_id", r.MaxID),
		slog.Int64("tombstone", overrode), slog.String("reason", strings.TrimSpace(guard.reason)))
	_ = h.Handle(ctx, rec)
	return nil
}

// rowJSON is one row of `tag list --json`. max_id is a string because 64-bit
// IDs pass JavaScript's 2^53, as in leaf-go's JSON API.
type rowJSON struct {
	BizTag      string    `json:"biz_tag"`
	MaxID       int64     `json:"max_id,string"`
	Step        int64     `json:"step"`
	Description string    `json:"description"`
	UpdateTime  time.Time `json:"update_time"`
	Ordered     bool      `json:"ordered"`
}

func newTagListCmd(e env, g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List every tag: tag, max_id, step, description, update_time",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, g, func(ctx context.Context, st store.Store) error {
				rows, err := st.Rows(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]rowJSON, 0, len(rows))
					for _, r := range rows {
						out = append(out, rowJSON(r))
					}
					enc := json.NewEncoder(e.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(out)
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
				fprintf(tw, "TAG\tMAX_ID\tSTEP\tDESCRIPTION\tUPDATE_TIME\n")
				for _, r := range rows {
					ut := "-"
					if !r.UpdateTime.IsZero() {
						ut = r.UpdateTime.UTC().Format("2006-01-02 15:04:05") + " UTC"
					}
					fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", cell(r.BizTag), r.MaxID, r.Step, cell(r.Description), ut)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array (max_id as a string, update_time RFC 3339)")
	return cmd
}

func newTagUpdateCmd(e env, g *globals) *cobra.Command {
	var (
		step int64
		desc string
		gf   groupFlags // tag_group.go
	)
	cmd := &cobra.Command{
		Use:   "update <tag> [--step N] [--description S] [--time-zone Z --retention N]",
		Short: "Change a tag's step or description (never its max_id; see fence)",
		Long: `Change a tag's step or description. max_id is never changed: use
leafctl tag fence to move it forward. Servers use a new step from their next
allocation of the tag.`,
		Args: exactArgs(1, "one tag"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tag := args[0]
			if handled, err := updateGroup(cmd, e, g, tag, step, desc, gf); handled {
				return err
			}
			stepSet, descSet := cmd.Flags().Changed("step"), cmd.Flags().Changed("description")
			if !stepSet && !descSet {
				return usagef("tag update %s: nothing to change (give --step and/or --description)", show(tag))
			}
			// Check what was given before touching the database; the
			// other field comes from the row.
			probe := store.Row{BizTag: tag, Step: 1}
			if stepSet {
				probe.Step = step
			}
			if descSet {
				probe.Description = desc
			}
			if err := checkRow(probe); err != nil {
				return err
			}
			return withStore(cmd, g, func(ctx context.Context, st store.Store) error {
				old, err := findRow(ctx, st, tag)
				if err != nil {
					return err
				}
				r := old
				if stepSet {
					r.Step = step
				}
				if descSet {
					r.Description = desc
				}
				if err := checkRow(r); err != nil {
					return err
				}
				if err := st.Update(ctx, tag, r.Step, r.Description); err != nil {
					return err
				}
				var changes []string
				if stepSet {
					changes = append(changes, fmt.Sprintf("step %d -> %d", old.Step, r.Step))
				}
				if descSet {
					changes = append(changes, fmt.Sprintf("description %s -> %s", strconv.Quote(old.Description), strconv.Quote(r.Description)))
				}
				fprintf(e.stdout, "updated tag %s: %s\n", show(tag), strings.Join(changes, ", "))
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&step, "step", 0, fmt.Sprintf("new step, 1..%d", store.MaxStep))
	f.StringVar(&desc, "description", "", `new description ("" clears it)`)
	gf.add(cmd)
	return cmd
}

func newTagDeleteCmd(e env, g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete <tag> [--yes]",
		Short: "Delete a tag (asks first on a terminal; --yes otherwise)",
		Long: `Delete a tag. Its max_id is the only record of the IDs it handed out: a
tag created again under the same name must start above it (--max-id), or it
repeats IDs; the database keeps that max_id (a tombstone), and a create
below it is refused without --force --reason. On a terminal leafctl asks for confirmation; elsewhere it
refuses without --yes.`,
		Args: exactArgs(1, "one tag"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tag := args[0]
			return withStore(cmd, g, func(ctx context.Context, st store.Store) error {
				r, err := findRow(ctx, st, tag)
				if err != nil {
					return err
				}
				if err := checkPlainName(ctx, st, tag); err != nil { // tag_group.go
					return fmt.Errorf("%w: delete old periods with leafctl tag prune", err)
				}
				if !yes {
					if !e.interactive {
						return usagef("refusing to delete tag %s (max_id %d) without --yes: stdin is not a terminal", show(tag), r.MaxID)
					}
					fprintf(e.stderr, "Delete tag %s (max_id %d, step %d)? A tag created again under this name must use --max-id %d or it repeats IDs. [y/N] ",
						show(tag), r.MaxID, r.Step, r.MaxID)
					answer, _ := bufio.NewReader(e.stdin).ReadString('\n')
					if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
						return fmt.Errorf("tag %s %w", show(tag), errNotConfirmed)
					}
				}
				if err := st.Delete(ctx, tag); err != nil {
					return err
				}
				fprintf(e.stdout, "deleted tag %s (its max_id was %d)\n", show(tag), r.MaxID)
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	return cmd
}

func newTagFenceCmd(e env, g *globals) *cobra.Command {
	var (
		minID int64
		guard markGuard
	)
	cmd := &cobra.Command{
		Use:   "fence <tag> --min N [--marks FILE]…",
		Short: "Raise a tag's max_id to at least N (never lowers it), e.g. after a database restore",
		Long: `Raise a tag's max_id to at least --min, never lowering it, so that every
segment handed out afterwards starts at or above --min. Use it after a
restored backup or a failover to a lagging replica took the database back in
time: leaf-server refuses such a tag until it is fenced past the highest
max_id it has seen (its log and metrics name the value to fence to). With
--marks <data-dir>/segment-marks.log of each server, a --min below a
server's mark for the tag is refused (--force --reason to go below anyway).

An audit line (operator, tag, old and new max_id, time) goes to stderr.`,
		Args: exactArgs(1, "one tag"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tag := args[0]
			if err := required(cmd, "min"); err != nil {
				return err
			}
			if minID < 1 {
				return usagef("--min must be at least 1, got %d", minID)
			}
			if err := guard.check(cmd.Context(), e, tag, "--min", minID); err != nil {
				return err
			}
			return withStore(cmd, g, func(ctx context.Context, st store.Store) error {
				before, err := findRow(ctx, st, tag)
				if err != nil {
					return err
				}
				after, err := st.Fence(ctx, tag, minID)
				if err != nil {
					return err
				}
				if after.MaxID == before.MaxID {
					fprintf(e.stdout, "tag %s: max_id %d is already at least %d; unchanged\n", show(tag), before.MaxID, minID)
				} else {
					fprintf(e.stdout, "fenced tag %s: max_id %d -> %d\n", show(tag), before.MaxID, after.MaxID)
				}
				audit(ctx, e, tag, minID, before.MaxID, after.MaxID)
				return nil
			})
		},
	}
	cmd.Flags().Int64Var(&minID, "min", 0, "the lowest max_id the tag may have afterwards (required)")
	guard.addFlags(cmd)
	return cmd
}

// audit writes the audit line of a fence to stderr through slog.
func audit(ctx context.Context, e env, tag string, minID, oldMax, newMax int64) {
	h := slog.NewTextHandler(e.stderr, nil)
	r := slog.NewRecord(e.now(), slog.LevelInfo, "audit: tag fence", 0)
	r.AddAttrs(
		slog.String("user", e.user()),
		slog.String("tag", tag),
		slog.Int64("min", minID),
		slog.Int64("old_max_id", oldMax),
		slog.Int64("new_max_id", newMax),
		slog.Bool("changed", oldMax != newMax),
	)
	_ = h.Handle(ctx, r)
}

// show returns s for a table or message, quoted when it holds spaces,
// control characters or nothing, so that it cannot break the layout.
func show(s string) string {
	if s == "" {
		return `""`
	}
	for _, c := range s {
		if unicode.IsSpace(c) || !unicode.IsPrint(c) || c == '"' {
			return strconv.Quote(s)
		}
	}
	return s
}

// cell returns s for a table cell: "-" when empty, quoted when it holds
// control characters (a tab or newline would break the alignment).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	for _, c := range s {
		if !unicode.IsPrint(c) && c != ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}
