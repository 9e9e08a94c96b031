// Package sqlstore holds what the database/sql based stores (mysql, sqlite)
// do the same way: listing tags and rows, and classifying an UPDATE or
// DELETE that matched no row. The allocation itself stays per dialect.
package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leaf-go/leaf/store"
)

// Scanner is a *sql.Row or *sql.Rows.
type Scanner interface{ Scan(...any) error }

// RowColumns are the leaf_alloc columns Rows selects, in the order a
// dialect's scan function reads them.
const RowColumns = `biz_tag, max_id, step, description, update_time`

// Tags lists every biz_tag, ordered.
func Tags(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT biz_tag FROM leaf_alloc ORDER BY biz_tag`)
	if err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	defer rows.Close()
	var tags []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("tags: %w", err)
		}
		tags = append(tags, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	return tags, nil
}

// Rows reads every row ordered by biz_tag, each through scan (which knows
// the dialect's update_time type).
func Rows(ctx context.Context, db *sql.DB, scan func(Scanner) (store.Row, error)) ([]store.Row, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+RowColumns+` FROM leaf_alloc ORDER BY biz_tag`)
	if err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	defer rows.Close()
	var out []store.Row
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("rows: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	return out, nil
}

// Affected turns the result of an UPDATE or DELETE of one tag into an error:
// err wrapped, or [store.ErrTagNotFound] when no row matched.
func Affected(op, tag string, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("%s %q: %w", op, tag, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s %q: %w", op, tag, err)
	}
	if n == 0 {
		return fmt.Errorf("%s %q: %w", op, tag, store.ErrTagNotFound)
	}
	return nil
}

// NullString stores "" as NULL, as Leaf's description column defaults.
func NullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
