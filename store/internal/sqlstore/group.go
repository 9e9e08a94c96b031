package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leaf-go/leaf/store"
)

// groupColumns are the leaf_group columns, in the order scanGroup reads them.
const groupColumns = `biz_tag, grp, time_zone, format, step, retention, pruned_before, description`

// Groups lists leaf_group ordered by biz_tag.
func Groups(ctx context.Context, db *sql.DB) ([]store.Group, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+groupColumns+` FROM leaf_group ORDER BY biz_tag`)
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	defer rows.Close()
	var out []store.Group
	for rows.Next() {
		g, err := scanGroup(rows)
		if err != nil {
			return nil, fmt.Errorf("groups: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	return out, nil
}

// CreateGroup inserts g; dup tells a duplicate-key error of the dialect.
func CreateGroup(ctx context.Context, db *sql.DB, g store.Group, dup func(error) bool) error {
	_, err := db.ExecContext(ctx, `INSERT INTO leaf_group (`+groupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		g.BizTag, g.Grp, g.TimeZone, g.Format, g.Step, g.Retention, g.PrunedBefore, NullString(g.Description))
	if err != nil && dup(err) {
		return fmt.Errorf("create group %q: %w", g.BizTag, store.ErrTagExists)
	}
	if err != nil {
		return fmt.Errorf("create group %q: %w", g.BizTag, err)
	}
	return nil
}

// UpdateGroup sets time_zone, step, retention and description of g.BizTag.
func UpdateGroup(ctx context.Context, db *sql.DB, g store.Group) error {
	res, err := db.ExecContext(ctx,
		`UPDATE leaf_group SET time_zone = ?, step = ?, retention = ?, description = ? WHERE biz_tag = ?`,
		g.TimeZone, g.Step, g.Retention, NullString(g.Description), g.BizTag)
	return Affected("update group", g.BizTag, res, err)
}

// RaisePrunedBefore raises pruned_before of tag to key, never lowering it.
func RaisePrunedBefore(ctx context.Context, db *sql.DB, tag, key string) (string, error) {
	if _, err := db.ExecContext(ctx,
		`UPDATE leaf_group SET pruned_before = ? WHERE biz_tag = ? AND pruned_before < ?`, key, tag, key); err != nil {
		return "", fmt.Errorf("prune group %q: %w", tag, err)
	}
	var got string
	err := db.QueryRowContext(ctx, `SELECT pruned_before FROM leaf_group WHERE biz_tag = ?`, tag).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("prune group %q: %w", tag, store.ErrTagNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("prune group %q: %w", tag, err)
	}
	return got, nil
}

// DeleteGroup removes the declaration of tag.
func DeleteGroup(ctx context.Context, db *sql.DB, tag string) error {
	res, err := db.ExecContext(ctx, `DELETE FROM leaf_group WHERE biz_tag = ?`, tag)
	return Affected("delete group", tag, res, err)
}
