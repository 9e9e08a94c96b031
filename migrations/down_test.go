package migrations

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestDownKeepsData checks that rolling the migration back leaves leaf_alloc
// and its rows in place.
func TestDownKeepsData(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Up(ctx, db, "sqlite"); err != nil {
		t.Fatalf("Up() = %v", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('keep', 77, 5)"); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(db, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Down(ctx); err != nil {
		t.Fatalf("Down() = %v, want nil (a no-op)", err)
	}
	var maxID int64
	if err := db.QueryRowContext(ctx, "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'keep'").Scan(&maxID); err != nil || maxID != 77 {
		t.Errorf("after Down(): max_id = %d, %v, want 77", maxID, err)
	}
	if err := Up(ctx, db, "sqlite"); err != nil {
		t.Errorf("Up() after Down() = %v, want nil", err)
	}
}
