package sqlite

import (
	"context"
	"fmt"

	"github.com/leaf-go/leaf/store"
)

// Engine reports the embedded SQLite and its sqlite_version(). Errors: the
// database's.
func (s *Store) Engine(ctx context.Context) (store.Engine, error) {
	var v string
	if err := s.db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&v); err != nil {
		return store.Engine{}, fmt.Errorf("engine: %w", err)
	}
	return store.Engine{Name: store.EngineSQLite, Version: v}, nil
}
