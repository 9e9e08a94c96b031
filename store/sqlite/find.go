package sqlite

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

// Now implements [store.Store]: SQLite runs in this process, so this is
// the host's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	return sqlstore.Now(ctx, s.db, `SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`)
}

// FindTags implements [store.Store].
func (s *Store) FindTags(ctx context.Context, tags []string) (map[string]bool, error) {
	return sqlstore.FindTags(ctx, s.db, `SELECT a.biz_tag, o.biz_tag IS NOT NULL
	FROM leaf_alloc a LEFT JOIN leaf_ordered o ON o.biz_tag = a.biz_tag`, tags)
}
