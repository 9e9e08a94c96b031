package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/store"
)

// FindGroups implements [store.Store] with biz_tag = ANY($1), one
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

// Now implements [store.Store] with now() (the transaction's start,
// here the statement's).
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := s.pool.QueryRow(ctx, `SELECT (extract(epoch FROM now()) * 1000)::bigint`).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// FindTags implements [store.Store] with biz_tag = ANY($1), one statement
// per [store.FindChunk] names, the ordered flag read by a LEFT JOIN of
// leaf_ordered in the same statement.
func (s *Store) FindTags(ctx context.Context, tags []string) (map[string]bool, error) {
	out := map[string]bool{}
	for c := range slices.Chunk(tags, store.FindChunk) {
		rows, _ := s.pool.Query(ctx, `SELECT a.biz_tag, o.biz_tag IS NOT NULL
			FROM leaf_alloc a LEFT JOIN leaf_ordered o ON o.biz_tag = a.biz_tag
			WHERE a.biz_tag = ANY($1)`, c)
		var (
			tag     string
			ordered bool
		)
		_, err := pgx.ForEachRow(rows, []any{&tag, &ordered}, func() error {
			out[tag] = ordered
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("find tags: %w", err)
		}
	}
	return out, nil
}
