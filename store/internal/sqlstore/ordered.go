package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leaf-go/leaf/store"
)

// OrderedRows is Rows with each row's ordered flag: query selects the
// RowColumns of leaf_alloc and, as a sixth column, whether leaf_ordered has
// the tag (migration 6), ordered by biz_tag. scan reads the first five.
func OrderedRows(ctx context.Context, db *sql.DB, query string, scan func(Scanner) (store.Row, error)) ([]store.Row, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	defer rows.Close()
	var out []store.Row
	for rows.Next() {
		var ordered bool
		r, err := scan(orderedScanner{rows, &ordered})
		if err != nil {
			return nil, fmt.Errorf("rows: %w", err)
		}
		r.Ordered = ordered
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	return out, nil
}

// orderedScanner scans the columns asked for, then the ordered flag.
type orderedScanner struct {
	rows    *sql.Rows
	ordered *bool
}

func (s orderedScanner) Scan(dest ...any) error { return s.rows.Scan(append(dest, s.ordered)...) }

// InsertRow runs insert (Create's INSERT into leaf_alloc, args[0] the
// biz_tag) and, in the same transaction, makes leaf_ordered agree with
// ordered: a stale row (left by a plain SQL delete of the tag) is removed
// first, so that a tag created plain is never served as ordered.
func InsertRow(ctx context.Context, db *sql.DB, ordered bool, insert string, args ...any) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, insert, args...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = ?`, args[0]); err != nil {
		return err
	}
	if ordered {
		if _, err := tx.ExecContext(ctx, `INSERT INTO leaf_ordered (biz_tag) VALUES (?)`, args[0]); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// DeleteRow deletes the leaf_alloc row of tag and its leaf_ordered row in
// one transaction; the result is the leaf_alloc DELETE's.
func DeleteRow(ctx context.Context, db *sql.DB, tag string) (sql.Result, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM leaf_alloc WHERE biz_tag = ?`, tag)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = ?`, tag); err != nil {
		return nil, err
	}
	return res, tx.Commit()
}
