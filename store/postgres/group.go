package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaf-go/leaf/store"
)

// groupColumns are the leaf_group columns, in the order Groups scans them.
const groupColumns = `biz_tag, grp, time_zone, format, step, retention, pruned_before, description`

// Groups implements [store.Store].
func (s *Store) Groups(ctx context.Context) ([]store.Group, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+groupColumns+` FROM leaf_group ORDER BY biz_tag`)
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanGroup)
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	return out, nil
}

// scanGroup reads one leaf_group row of groupColumns.
func scanGroup(r pgx.CollectableRow) (store.Group, error) {
	var g store.Group
	var desc *string
	err := r.Scan(&g.BizTag, &g.Grp, &g.TimeZone, &g.Format, &g.Step, &g.Retention, &g.PrunedBefore, &desc)
	if desc != nil {
		g.Description = *desc
	}
	return g, err
}

// CreateGroup implements [store.Store].
func (s *Store) CreateGroup(ctx context.Context, g store.Group) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO leaf_group (`+groupColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		g.BizTag, g.Grp, g.TimeZone, g.Format, g.Step, g.Retention, g.PrunedBefore, nullString(g.Description))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == uniqueViolation {
		return fmt.Errorf("create group %q: %w", g.BizTag, store.ErrTagExists)
	}
	if err != nil {
		return fmt.Errorf("create group %q: %w", g.BizTag, err)
	}
	return nil
}

// UpdateGroup implements [store.Store].
func (s *Store) UpdateGroup(ctx context.Context, g store.Group) error {
	ct, err := s.pool.Exec(ctx,
		`UPDATE leaf_group SET time_zone = $2, step = $3, retention = $4, description = $5 WHERE biz_tag = $1`,
		g.BizTag, g.TimeZone, g.Step, g.Retention, nullString(g.Description))
	return affected("update group", g.BizTag, ct, err)
}

// RaisePrunedBefore implements [store.Store] in one statement.
func (s *Store) RaisePrunedBefore(ctx context.Context, tag, key string) (string, error) {
	var got string
	err := s.pool.QueryRow(ctx, `UPDATE leaf_group SET pruned_before = GREATEST(pruned_before, $2)
		WHERE biz_tag = $1 RETURNING pruned_before`, tag, key).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("prune group %q: %w", tag, store.ErrTagNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("prune group %q: %w", tag, err)
	}
	return got, nil
}

// DeleteGroup implements [store.Store].
func (s *Store) DeleteGroup(ctx context.Context, tag string) error {
	ct, err := s.pool.Exec(ctx, `DELETE FROM leaf_group WHERE biz_tag = $1`, tag)
	return affected("delete group", tag, ct, err)
}
