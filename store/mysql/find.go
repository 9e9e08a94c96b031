package mysql

import (
	"context"
	"time"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/internal/sqlstore"
)

// FindGroups implements [store.GroupStore].
func (s *Store) FindGroups(ctx context.Context, tags []string) ([]store.Group, error) {
	return sqlstore.FindGroups(ctx, s.db, tags)
}

// Now implements [store.GroupStore] with NOW(3): UNIX_TIMESTAMP converts it
// back from the session's time zone, so the zone plays no part.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	return sqlstore.Now(ctx, s.db, `SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)`)
}

// FindTags implements [store.Store].
func (s *Store) FindTags(ctx context.Context, tags []string) ([]string, error) {
	return sqlstore.FindTags(ctx, s.db, tags)
}
