// Package sqlstore holds what the database/sql based stores (mysql, sqlite)
// do the same way: listing tags and rows, and classifying an UPDATE or
// DELETE that matched no row. The allocation itself stays per dialect.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
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

// ReturnTail runs the statements of [store.Store.ReturnTail] in tx, which
// changes nothing while the tag has a tombstone (a forced re-create keeps
// it: the re-created row may reach the caller's max_id again),
// the caller commits when it reports true and rolls back otherwise. now is
// the dialect's expression for the current time. Placeholders are ?.
func ReturnTail(ctx context.Context, tx *sql.Tx, now, tag string, from, to, seq int64) (bool, error) {
	res, err := tx.ExecContext(ctx,
		`UPDATE leaf_alloc SET max_id = ?, update_time = `+now+` WHERE biz_tag = ? AND max_id = ?
		 AND NOT EXISTS (SELECT 1 FROM leaf_tombstone WHERE biz_tag = ?)`, to, tag, from, tag)
	if err != nil {
		return false, fmt.Errorf("return tail of %q: %w", tag, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, err // someone allocated after the caller: no-op
	}
	if seq == 1 {
		res, err = tx.ExecContext(ctx,
			`INSERT INTO leaf_tail_return (biz_tag, returned_from, returned_to, seq) SELECT ?, ?, ?, 1 FROM leaf_alloc
			 WHERE biz_tag = ? AND NOT EXISTS (SELECT 1 FROM leaf_tail_return WHERE biz_tag = ?)`, tag, from, to, tag, tag)
	} else {
		res, err = tx.ExecContext(ctx,
			`UPDATE leaf_tail_return SET returned_from = ?, returned_to = ?, seq = ? WHERE biz_tag = ? AND seq = ?`,
			from, to, seq, tag, seq-1)
	}
	if err != nil {
		return false, fmt.Errorf("record tail return of %q: %w", tag, err)
	}
	n, err := res.RowsAffected()
	return err == nil && n == 1, err
}

// TailReturns reads every row of leaf_tail_return.
func TailReturns(ctx context.Context, db *sql.DB) ([]store.TailReturn, error) {
	rows, err := db.QueryContext(ctx, `SELECT biz_tag, returned_from, returned_to, seq FROM leaf_tail_return`)
	if err != nil {
		return nil, fmt.Errorf("read tail returns: %w", err)
	}
	defer rows.Close()
	var out []store.TailReturn
	for rows.Next() {
		var r store.TailReturn
		if err := rows.Scan(&r.BizTag, &r.From, &r.To, &r.Seq); err != nil {
			return nil, fmt.Errorf("read tail returns: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tail returns: %w", err)
	}
	return out, nil
}

// TailReturnOf reads tag's row of leaf_tail_return; the zero TailReturn
// when there is none.
func TailReturnOf(ctx context.Context, db *sql.DB, tag string) (store.TailReturn, error) {
	r := store.TailReturn{BizTag: tag}
	err := db.QueryRowContext(ctx, `SELECT returned_from, returned_to, seq FROM leaf_tail_return WHERE biz_tag = ?`, tag).
		Scan(&r.From, &r.To, &r.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return store.TailReturn{}, nil
	}
	if err != nil {
		return store.TailReturn{}, fmt.Errorf("read tail return of %q: %w", tag, err)
	}
	return r, nil
}
