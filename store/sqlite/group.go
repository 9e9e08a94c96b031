package sqlite

import (
	"context"
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/internal/sqlstore"
)

// Groups implements [store.Store].
func (s *Store) Groups(ctx context.Context) ([]store.Group, error) { return sqlstore.Groups(ctx, s.db) }

// CreateGroup implements [store.Store].
func (s *Store) CreateGroup(ctx context.Context, g store.Group) error {
	return sqlstore.CreateGroup(ctx, s.db, g, func(err error) bool {
		var se *sqlite.Error
		return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
	})
}

// UpdateGroup implements [store.Store].
func (s *Store) UpdateGroup(ctx context.Context, g store.Group) error {
	return sqlstore.UpdateGroup(ctx, s.db, g)
}

// RaisePrunedBefore implements [store.Store].
func (s *Store) RaisePrunedBefore(ctx context.Context, tag, key string) (string, error) {
	return sqlstore.RaisePrunedBefore(ctx, s.db, tag, key)
}

// DeleteGroup implements [store.Store].
func (s *Store) DeleteGroup(ctx context.Context, tag string) error {
	return sqlstore.DeleteGroup(ctx, s.db, tag)
}
