package mysql

import (
	"context"
	"time"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/internal/sqlstore"
)

// FindGroups implements [store.Store].
func (s *Store) FindGroups(ctx context.Context, tags []string) ([]store.Group, error) {
	return sqlstore.FindGroups(ctx, s.db, tags)
}

// Now implements [store.Store] with NOW(3): UNIX_TIMESTAMP converts it
// back from the session's time zone, so the zone plays no part.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	return sqlstore.Now(ctx, s.db, `SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)`)
}

// FindTags implements [store.Store], with the join of rowsQuery (exact
// names in leaf_ordered whatever the charset of leaf_alloc).
func (s *Store) FindTags(ctx context.Context, tags []string) (map[string]bool, error) {
	return sqlstore.FindTags(ctx, s.db, `SELECT a.biz_tag, o.biz_tag IS NOT NULL
	FROM leaf_alloc a LEFT JOIN leaf_ordered o ON o.biz_tag = CONVERT(a.biz_tag USING utf8mb4) COLLATE utf8mb4_bin`, tags)
}
