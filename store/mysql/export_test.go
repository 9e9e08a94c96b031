package mysql

import "context"

// ExecSQL runs one raw statement, for storetest's cases that need rows Create
// refuses (a non-positive step).
func (s *Store) ExecSQL(ctx context.Context, query string) error {
	_, err := s.db.ExecContext(ctx, query)
	return err
}

// Interpolates reports whether s fills placeholders in client-side.
func (s *Store) Interpolates() bool { return s.interpolate }
