package postgres_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	if got, err := b.Allocate(ctx, "keep", 0, 0); err != nil || got.Start() != 99 {
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

// TestNewNotStarted: a Store built by New refuses every call with
// store.ErrNotOpen, touching no table, until Start; then it serves. A
// failed Start leaves it refusing, with that failure in the error.
func TestNewNotStarted(t *testing.T) {
	dsn := dbtest.Postgres(t)
	ref := open(t, dsn)
	s, err := postgres.New(dsn)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.RunNotOpen(t, ref, s, s.Start)

	down, err := postgres.New("postgres://u:s3cr3t@127.0.0.1:1/db?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatalf("New(unreachable) = %v", err)
	}
	defer down.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := down.Start(ctx, true); err == nil {
		t.Fatal("Start(unreachable) = nil, want an error")
	}
	err = down.Ping(ctx)
	if !errors.Is(err, store.ErrNotOpen) || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Ping after a failed Start = %v, want store.ErrNotOpen naming the failed connect, without the password", err)
	}
}

// TestAllocateSerializable runs allocations from four stores (four servers)
// at once on a database whose default isolation is SERIALIZABLE: PostgreSQL
// then refuses concurrent updates of the row with SQLSTATE 40001, and
// Allocate must retry them instead of failing, without ever overlapping.
func TestAllocateSerializable(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.Postgres(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET default_transaction_isolation = 'serializable'`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	const servers, workers, each = 4, 8, 25
	var stores []*postgres.Store
	for range servers {
		stores = append(stores, open(t, dsn))
	}
	var iso string
	if err := pgxQuery(ctx, dsn, `SHOW default_transaction_isolation`, &iso); err != nil || iso != "serializable" {
		t.Fatalf("isolation = %q, %v; want serializable", iso, err)
	}
	if err := stores[0].Create(ctx, store.Row{BizTag: "ser", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []store.Allocation
	var wg sync.WaitGroup
	for s := range servers {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					a, err := stores[s].Allocate(ctx, "ser", 0, 0)
					if err != nil {
						t.Errorf("Allocate(%q) on a serializable database: %v", "ser", err)
						return
					}
					mu.Lock()
					got = append(got, a)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(got) != servers*workers*each {
		t.Fatalf("%d allocations succeeded, want %d", len(got), servers*workers*each)
	}
	slices.SortFunc(got, func(a, b store.Allocation) int { return cmp.Compare(a.MaxID, b.MaxID) })
	for i, a := range got {
		if want := int64(1 + 10*(i+1)); a.MaxID != want {
			t.Fatalf("allocation %d has max_id %d, want %d: ranges overlap or have gaps", i, a.MaxID, want)
		}
	}
}

func pgxQuery(ctx context.Context, dsn, q string, dest any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, q).Scan(dest)
}

// TestEngine: the local server is a PostgreSQL primary.
func TestEngine(t *testing.T) {
	s, err := postgres.Open(context.Background(), dbtest.Postgres(t), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := s.Engine(context.Background())
	if err != nil || e.Name != store.EnginePostgres || !strings.HasPrefix(e.Version, "PostgreSQL") || e.Warnings != nil {
		t.Errorf("Engine() = %+v, %v, want a PostgreSQL primary without warnings", e, err)
	}
}
