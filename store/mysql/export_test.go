package mysql

import (
	"context"

	"github.com/leaf-go/leaf/store"
)

// ExecSQL runs one raw statement, for storetest's cases that need rows Create
// refuses (a non-positive step).
func (s *Store) ExecSQL(ctx context.Context, query string) error {
	_, err := s.db.ExecContext(ctx, query)
	return err
}

// Interpolates reports whether s fills placeholders in client-side.
func (s *Store) Interpolates() bool { return s.interpolate }

// NoLockStore is a Store whose claim reads without FOR UPDATE SKIP LOCKED:
// what TiDB's SKIP LOCKED amounts to (accepted, neither locks nor skips), so
// that the claim's guarded UPDATE alone must keep claimers apart.
type NoLockStore struct{ *Store }

// ClaimWorker claims without the lock.
func (n NoLockStore) ClaimWorker(ctx context.Context, c store.Claim) (store.Lease, error) {
	return n.claimWorker(ctx, c, "")
}
