package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/leaf-go/leaf/store"
)

// FindTags maps the biz_tags among tags that have a leaf_alloc row to
// whether each is ordered, one IN query per [store.FindChunk] names:
// selectFrom selects a.biz_tag and the ordered flag from leaf_alloc a LEFT
// JOIN leaf_ordered (the join differs by dialect), and FindTags appends
// `WHERE a.biz_tag IN (…)`.
func FindTags(ctx context.Context, db *sql.DB, selectFrom string, tags []string) (map[string]bool, error) {
	out := map[string]bool{}
	err := chunked(tags, func(in string, args []any) error {
		rows, err := db.QueryContext(ctx, selectFrom+` WHERE a.biz_tag IN (`+in+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				t       string
				ordered bool
			)
			if err := rows.Scan(&t, &ordered); err != nil {
				return err
			}
			out[t] = ordered
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("find tags: %w", err)
	}
	return out, nil
}

// FindGroups returns the leaf_group declarations of the names among tags
// that have one, one IN query per [store.FindChunk] names.
func FindGroups(ctx context.Context, db *sql.DB, tags []string) ([]store.Group, error) {
	var out []store.Group
	err := chunked(tags, func(in string, args []any) error {
		rows, err := db.QueryContext(ctx, `SELECT `+groupColumns+` FROM leaf_group WHERE biz_tag IN (`+in+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			g, err := scanGroup(rows)
			if err != nil {
				return err
			}
			out = append(out, g)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("find groups: %w", err)
	}
	return out, nil
}

// chunked calls query once per [store.FindChunk] names of tags, with the
// placeholder list ("?, ?, …") and the names as arguments.
func chunked(tags []string, query func(in string, args []any) error) error {
	for len(tags) > 0 {
		n := min(len(tags), store.FindChunk)
		args := make([]any, n)
		for i, t := range tags[:n] {
			args[i] = t
		}
		if err := query(strings.Repeat("?, ", n-1)+"?", args); err != nil {
			return err
		}
		tags = tags[n:]
	}
	return nil
}

// Now reads the database's clock with query, which must answer one
// integer: milliseconds since the Unix epoch.
func Now(ctx context.Context, db *sql.DB, query string) (time.Time, error) {
	var ms int64
	if err := db.QueryRowContext(ctx, query).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// scanGroup reads one leaf_group row of groupColumns.
func scanGroup(s Scanner) (store.Group, error) {
	var g store.Group
	var desc sql.NullString
	err := s.Scan(&g.BizTag, &g.Grp, &g.TimeZone, &g.Format, &g.Step, &g.Retention, &g.PrunedBefore, &desc)
	g.Description = desc.String
	return g, err
}
