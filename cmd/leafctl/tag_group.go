package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	_ "time/tzdata" // zone rules when the system has none (as leaf-server)

	"github.com/spf13/cobra"

	"github.com/leaf-go/leaf/bizno"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
)

// groupFlags are the flags of date-grouped tags (issue 14) on tag create
// and tag update.
type groupFlags struct {
	group, timeZone, format string
	retention               int64
}

// add registers the flags on cmd.
func (gf *groupFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&gf.group, "group", "", "date-grouped tag: day, month or year; its sequence restarts every period (rows <tag>:<period>)")
	f.StringVar(&gf.timeZone, "time-zone", "UTC", "IANA time zone of the periods' midnight, e.g. Asia/Shanghai (grouped tags)")
	f.StringVar(&gf.format, "format", "", "ID template of a grouped tag, e.g. 'ORD{yyyyMMdd}{seq:6}' (see docs/business-numbers.md)")
	f.Int64Var(&gf.retention, "retention", 0, "periods a grouped tag keeps (the server prunes older ones); 0 keeps all")
}

// changed reports whether any group-only flag (not --step/--description)
// was given.
func (gf *groupFlags) changed(cmd *cobra.Command) bool {
	for _, n := range []string{"group", "time-zone", "format", "retention"} {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}

// plainOnly refuses group-only flags on the create of a plain tag (no
// --group): they used to be dropped silently, creating a plain tag the
// user did not ask for.
func (gf *groupFlags) plainOnly(cmd *cobra.Command) error {
	var given []string
	for _, n := range []string{"group", "time-zone", "format", "retention"} {
		if cmd.Flags().Changed(n) {
			given = append(given, "--"+n)
		}
	}
	switch {
	case len(given) == 0:
		return nil
	case cmd.Flags().Changed("group"):
		return usagef("--group wants day, month or year, got \"\"")
	}
	return usagef("%s: only for grouped tags; add --group day, month or year, or leave it out for a plain tag",
		strings.Join(given, ", "))
}

// createGroup declares a grouped tag (tag create --group).
func createGroup(cmd *cobra.Command, e env, g *globals, tag string, step int64, desc string, gf groupFlags) error {
	if gf.format == "" {
		return usagef("tag create --group: --format is required, e.g. 'ORD{yyyyMMdd}{seq:6}'")
	}
	d := store.Group{BizTag: tag, Grp: gf.group, TimeZone: gf.timeZone, Format: gf.format, Step: step,
		Retention: gf.retention, Description: desc}
	return withStore(cmd, g, func(ctx context.Context, st store.Store) error {
		if err := group.Declare(ctx, st, d); err != nil {
			if errors.Is(err, group.ErrDecl) {
				return &usageError{err}
			}
			return err
		}
		fprintf(e.stdout, "created grouped tag %s: %s in %s, format %s, step %d; rows %s:<period> are created on demand\n",
			show(tag), d.Grp, d.TimeZone, d.Format, d.Step, tag)
		return nil
	})
}

// checkPlainName refuses a plain tag named like a grouped tag or its
// periods. A database without leaf_group (not migrated) has no grouped tags.
func checkPlainName(ctx context.Context, st store.Store, tag string) error {
	err := group.CheckPlainTag(ctx, st, tag)
	if errors.Is(err, group.ErrPeriodRow) {
		return err
	}
	return nil // no leaf_group table yet: nothing to collide with
}

// findGroup returns the declaration of tag, ok false when it has none.
func findGroup(ctx context.Context, st store.Store, tag string) (store.Group, bool, error) {
	list, err := st.Groups(ctx)
	if err != nil {
		return store.Group{}, false, err
	}
	for _, d := range list {
		if d.BizTag == tag {
			return d, true, nil
		}
	}
	return store.Group{}, false, nil
}

// updateGroup runs tag update for a grouped tag; handled is false for a
// plain tag given no group flag (tag update's own path then runs).
func updateGroup(cmd *cobra.Command, e env, g *globals, tag string, step int64, desc string, gf groupFlags) (handled bool, err error) {
	err = withStore(cmd, g, func(ctx context.Context, st store.Store) error {
		d, ok, ferr := findGroup(ctx, st, tag)
		switch {
		case ferr != nil && gf.changed(cmd):
			return ferr
		case ferr != nil || !ok && !gf.changed(cmd):
			return nil // a plain tag
		case !ok:
			handled = true
			return fmt.Errorf("tag %q is not grouped: --group, --time-zone, --format and --retention apply to grouped tags: %w", tag, store.ErrTagNotFound)
		}
		handled = true
		fl := cmd.Flags()
		if fl.Changed("group") {
			d.Grp = gf.group
		}
		if fl.Changed("format") {
			d.Format = gf.format
		}
		if fl.Changed("time-zone") {
			d.TimeZone = gf.timeZone
		}
		if fl.Changed("retention") {
			d.Retention = gf.retention
		}
		if fl.Changed("step") {
			d.Step = step
		}
		if fl.Changed("description") {
			d.Description = desc
		}
		if err := group.Update(ctx, st, d); err != nil {
			if errors.Is(err, group.ErrDecl) {
				return &usageError{err}
			}
			return err
		}
		fprintf(e.stdout, "updated grouped tag %s: %s in %s, format %s, step %d, retention %d\n",
			show(tag), d.Grp, d.TimeZone, d.Format, d.Step, d.Retention)
		return nil
	})
	return handled, err
}

func newTagPeriodsCmd(e env, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "periods <tag>",
		Short: "List the periods of a grouped tag: row, IDs reserved against the width's capacity",
		Args:  exactArgs(1, "one grouped tag"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, g, func(ctx context.Context, st store.Store) error {
				d, ok, err := findGroup(ctx, st, args[0])
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("tag %q is not grouped: %w", args[0], store.ErrTagNotFound)
				}
				ps, err := group.ListPeriods(ctx, st, d)
				if err != nil {
					return err
				}
				fprintf(e.stdout, "%s: %s in %s, format %s, retention %d, pruned before %s\n",
					show(d.BizTag), d.Grp, d.TimeZone, d.Format, d.Retention, orDash(d.PrunedBefore))
				tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
				fprintf(tw, "PERIOD\tROW\tRESERVED\tCAPACITY\tUSED\n")
				for _, p := range ps {
					fprintf(tw, "%s\t%s\t%d\t%d\t%.2f%%\n", p.Key, cell(p.Row), p.Reserved, p.Capacity,
						100*float64(p.Reserved)/float64(p.Capacity))
				}
				return tw.Flush()
			})
		},
	}
}

func newTagPruneCmd(e env, g *globals) *cobra.Command {
	var before string
	cmd := &cobra.Command{
		Use:   "prune <tag> [--before 2026-11-01]",
		Short: "Delete the periods of a grouped tag before a date (default: past its retention)",
		Long: `Delete the period rows of a grouped tag older than --before (a date
2026-11-01 or a period key 20261101 / 202611 / 2026), or, without --before,
those past the tag's retention. The tag's pruned_before is raised first, so no
server serves or re-creates those periods again (a server whose clock reads
one refuses). The current period is never pruned.`,
		Args: exactArgs(1, "one grouped tag"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, g, func(ctx context.Context, st store.Store) error {
				d, ok, err := findGroup(ctx, st, args[0])
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("tag %q is not grouped: %w", args[0], store.ErrTagNotFound)
				}
				now := time.Now()
				key, err := pruneKey(d, before, now)
				if err != nil {
					return err
				}
				deleted, err := group.Prune(ctx, st, d, key, now)
				if errors.Is(err, group.ErrDecl) {
					return &usageError{err}
				}
				if err != nil {
					return err
				}
				fprintf(e.stdout, "pruned %s before %s: %d rows deleted\n", show(d.BizTag), key, len(deleted))
				for _, r := range deleted {
					fprintf(e.stdout, "  %s\n", r)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "delete periods before this date (2026-11-01) or period key (20261101)")
	return cmd
}

// pruneKey turns --before into a period key of d's group: a date
// (2006-01-02) becomes the key of its period; "" means d's retention.
func pruneKey(d store.Group, before string, now time.Time) (string, error) {
	grp, err := bizno.ParseGroup(d.Grp)
	if err != nil {
		return "", err
	}
	if before == "" {
		key, err := group.RetentionBefore(d, now)
		if err != nil {
			return "", err
		}
		if key == "" {
			return "", usagef("tag prune %s: give --before (the tag's retention is 0: keep all)", d.BizTag)
		}
		return key, nil
	}
	if strings.Contains(before, "-") {
		t, err := time.Parse("2006-01-02", before)
		if err != nil {
			return "", usagef("--before %q: want a date like 2026-11-01 or a period key like 20261101", before)
		}
		return grp.Key(t), nil
	}
	return before, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
