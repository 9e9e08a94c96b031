package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// rowsQuery reads every leaf_alloc row with its ordered flag (a row in
// leaf_ordered, migration 6) in one query; scanRow reads the first five
// columns, orderedRow the sixth.
const rowsQuery = `SELECT a.biz_tag, a.max_id, a.step, a.description, a.update_time, o.biz_tag IS NOT NULL
	FROM leaf_alloc a LEFT JOIN leaf_ordered o ON o.biz_tag = a.biz_tag
	ORDER BY a.biz_tag`

// orderedRow scans a row of rowsQuery: the columns scanRow asks for, then
// the ordered flag into ordered.
type orderedRow struct {
	pgx.Row
	ordered *bool
}

// Scan reads dest and then the ordered flag.
func (r orderedRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.ordered)...) }

// insertRow inserts the leaf_alloc row of Create and, in the same
// transaction, makes leaf_ordered agree with ordered: a stale row (left by a
// plain SQL delete of the tag) is removed first, so that a tag created plain
// is never served as ordered.
func (s *Store) insertRow(ctx context.Context, ordered bool, sql string, args ...any) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = $1`, args[0]); err != nil {
			return err
		}
		if ordered {
			_, err := tx.Exec(ctx, `INSERT INTO leaf_ordered (biz_tag) VALUES ($1)`, args[0])
			return err
		}
		return nil
	})
}

// deleteRow deletes the leaf_alloc row of tag and its leaf_ordered row in
// one transaction; the command tag is the leaf_alloc DELETE's.
func (s *Store) deleteRow(ctx context.Context, tag string) (pgconn.CommandTag, error) {
	var ct pgconn.CommandTag
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if ct, err = tx.Exec(ctx, `DELETE FROM leaf_alloc WHERE biz_tag = $1`, tag); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM leaf_ordered WHERE biz_tag = $1`, tag)
		return err
	})
	return ct, err
}
