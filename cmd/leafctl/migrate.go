package main

import (
	"context"
	"database/sql"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaf-go/leaf/migrations"
	"github.com/leaf-go/leaf/store/dsn"
)

func newMigrateCmd(e env, g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply or show the embedded leaf_alloc schema migrations",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (creates a SQLite file if missing), then show the status",
		Long: `Apply every pending migration to the database of --dsn, then show the status.

An existing Leaf leaf_alloc table is adopted unchanged. Running it again is a
no-op; concurrent runs (several servers starting at once) are serialised.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			db, dialect, err := openSQL(ctx, g.dsn, true)
			if err != nil {
				return err
			}
			defer db.Close()
			n, err := migrations.Apply(ctx, db, dialect)
			if err != nil {
				return err
			}
			switch n {
			case 0:
				fprintf(e.stdout, "%s is up to date: no migration to apply\n", dsn.Redact(g.dsn))
			case 1:
				fprintf(e.stdout, "%s: applied 1 migration\n", dsn.Redact(g.dsn))
			default:
				fprintf(e.stdout, "%s: applied %d migrations\n", dsn.Redact(g.dsn), n)
			}
			return printStatus(ctx, e.stdout, db, dialect)
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show each migration: version, name, applied, applied at",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			db, dialect, err := openSQL(ctx, g.dsn, false)
			if err != nil {
				return err
			}
			defer db.Close()
			return printStatus(ctx, e.stdout, db, dialect)
		},
	}
	cmd.AddCommand(up, status)
	return cmd
}

// printStatus writes the migrations table: version, name, applied, applied
// at (UTC, "-" when pending).
func printStatus(ctx context.Context, w io.Writer, db *sql.DB, dialect string) error {
	vs, err := migrations.Status(ctx, db, dialect)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fprintf(tw, "VERSION\tNAME\tAPPLIED\tAPPLIED AT\n")
	for _, v := range vs {
		applied, at := "no", "-"
		if v.Applied {
			applied = "yes"
			if !v.AppliedAt.IsZero() {
				at = v.AppliedAt.UTC().Format(time.DateTime) + " UTC"
			}
		}
		fprintf(tw, "%d\t%s\t%s\t%s\n", v.Version, v.Name, applied, at)
	}
	return tw.Flush()
}
