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

// RetryCounts returns nil: the SQLite store never re-runs a transaction
// (one writer at a time, with a busy timeout), so leaf_store_retries_total
// has no series for it.
func (s *Store) RetryCounts() map[string]uint64 { return nil }
