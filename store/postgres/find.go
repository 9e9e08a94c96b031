package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/store"
)

// FindGroups implements [store.GroupStore] with biz_tag = ANY($1), one
// statement per [store.FindChunk] names.
func (s *Store) FindGroups(ctx context.Context, tags []string) ([]store.Group, error) {
	var out []store.Group
	for c := range slices.Chunk(tags, store.FindChunk) {
		rows, err := s.pool.Query(ctx, `SELECT `+groupColumns+` FROM leaf_group WHERE biz_tag = ANY($1)`, c)
		if err != nil {
			return nil, fmt.Errorf("find groups: %w", err)
		}
		gs, err := pgx.CollectRows(rows, scanGroup)
		if err != nil {
			return nil, fmt.Errorf("find groups: %w", err)
		}
		out = append(out, gs...)
	}
	return out, nil
}

// Now implements [store.GroupStore] with now() (the transaction's start,
// here the statement's).
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := s.pool.QueryRow(ctx, `SELECT (extract(epoch FROM now()) * 1000)::bigint`).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// FindTags implements [store.Store] with biz_tag = ANY($1), one statement
// per [store.FindChunk] names.
func (s *Store) FindTags(ctx context.Context, tags []string) ([]string, error) {
	var out []string
	for c := range slices.Chunk(tags, store.FindChunk) {
		rows, _ := s.pool.Query(ctx, `SELECT biz_tag FROM leaf_alloc WHERE biz_tag = ANY($1)`, c)
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("find tags: %w", err)
		}
		out = append(out, found...)
	}
	return out, nil
}
