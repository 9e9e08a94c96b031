package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// TestOpenCreatesDirectory opens a file two directories below a fresh one.
func TestOpenCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "leaf.db")
	open(t, "sqlite:"+path)
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Open(%q) did not create the file: %v", path, err)
	}
}

func TestOpenBadPath(t *testing.T) {
	for _, give := range []string{"", "sqlite:", "leaf.db?_pragma=x", "a#b"} {
		if s, err := sqlite.Open(context.Background(), give, true); err == nil {
			s.Close()
			t.Errorf("Open(%q) = nil error, want an error", give)
		}
	}
}

// TestTwoStoresOneFile has two Stores (as two processes would: two
// connections) allocate from one file at once; their segments must be
// disjoint, and migrating the same file twice must be a no-op.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.SQLite(t)
	a, b := open(t, dsn), open(t, dsn)
	if err := a.Create(ctx, store.Row{BizTag: "shared", Step: 3}); err != nil {
		t.Fatal(err)
	}
	const each = 200
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards seen and errs
		seen = map[int64]bool{}
		errs []error
	)
	for _, s := range []*sqlite.Store{a, b, a, b} {
		wg.Go(func() {
			for range each {
				got, err := s.Allocate(ctx, "shared", 0, 0)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if seen[got.Start()] {
					errs = append(errs, fmt.Errorf("segment at %d handed out twice", got.Start()))
				}
				seen[got.Start()] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}
	rows, err := b.Rows(ctx)
	if want := int64(1 + 4*each*3); err != nil || len(rows) != 1 || rows[0].MaxID != want {
		t.Errorf("Rows() = %+v, %v, want max_id %d", rows, err, want)
	}
}

func TestEngine(t *testing.T) {
	s, err := sqlite.Open(context.Background(), ":memory:", true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if e, err := s.Engine(context.Background()); err != nil || e.Name != store.EngineSQLite || e.Version == "" {
		t.Errorf("Engine() = %+v, %v, want sqlite with a version", e, err)
	}
}
