package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/leaf-go/leaf/store"
)

// Engine detects the server behind s from version(): PostgreSQL,
// CockroachDB or YugabyteDB, and warns when it is a standby
// (pg_is_in_recovery()), which refuses every allocation. Errors: the
// server's.
func (s *Store) Engine(ctx context.Context) (store.Engine, error) {
	var version string
	if err := s.pool.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		return store.Engine{}, fmt.Errorf("engine: %w", err)
	}
	e := engineOf(version)
	if e.Name == store.EngineCockroachDB {
		return e, nil // no standbys to ask about
	}
	var standby bool
	if err := s.pool.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby); err != nil {
		return store.Engine{}, fmt.Errorf("engine: %w", err)
	}
	if standby {
		e.Warnings = append(e.Warnings, "the server is a standby (pg_is_in_recovery() is true): every allocation fails; "+
			"point the DSN at the primary, or list every node with target_session_attrs=read-write "+
			"(postgres://user:pass@h1:5432,h2:5432/db?target_session_attrs=read-write)")
	}
	return e, nil
}

// engineOf classifies a server from its version() string.
func engineOf(version string) store.Engine {
	e := store.Engine{Name: store.EnginePostgres, Version: version}
	switch {
	case strings.Contains(version, "CockroachDB"):
		e.Name = store.EngineCockroachDB
	case strings.Contains(version, "-YB-"):
		e.Name = store.EngineYugabyteDB
	}
	return e
}
