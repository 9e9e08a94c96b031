package sqlite_test

import (
	"context"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/sqlite"
	"github.com/leaf-go/leaf/store/storetest"
)

func open(t *testing.T, dsn string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), dsn, true)
	if err != nil {
		t.Fatalf("Open(%q) = %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, dbtest.SQLite(t)) })
}

func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, "sqlite::memory:") })
}
