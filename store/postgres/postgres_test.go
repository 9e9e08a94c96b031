package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/postgres"
	"github.com/leaf-go/leaf/store/storetest"
)

func open(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn, true)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, dbtest.Postgres(t)) })
}

// TestOpenTwice opens the same database twice with migrate: the second run
// finds the migration applied and the rows in place.
func TestOpenTwice(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.Postgres(t)
	a := open(t, dsn)
	if err := a.Create(ctx, store.Row{BizTag: "keep", MaxID: 99, Step: 5}); err != nil {
		t.Fatal(err)
	}
	b := open(t, dsn)
	if got, err := b.Allocate(ctx, "keep", 0); err != nil || got.Start() != 99 {
		t.Errorf("Allocate(%q) after a second Open = %+v, %v, want a segment starting at 99", "keep", got, err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := postgres.Open(ctx, "postgres://u:s3cr3t@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", false)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Open(unreachable) = %v, want an error without the password", err)
	}
}
