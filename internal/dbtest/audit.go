package dbtest

import (
	"database/sql"
	"slices"
	"testing"
)

// Range is the committed allocation [Lo, Hi) of one UPDATE of leaf_alloc.
type Range struct{ Lo, Hi int64 }

// InstallAudit adds to db (dialect "postgres" or "mysql") a table
// leaf_alloc_audit and an AFTER UPDATE trigger on leaf_alloc that records
// every committed UPDATE as the range [old max_id, new max_id) it reserved.
// The row is written in the UPDATE's own transaction, so a rolled-back
// allocation leaves no trace.
func InstallAudit(t testing.TB, db *sql.DB, dialect string) {
	t.Helper()
	stmts := []string{`CREATE TABLE leaf_alloc_audit (biz_tag varchar(128), old_max bigint, new_max bigint)`}
	if dialect == "postgres" {
		stmts = append(stmts,
			`CREATE FUNCTION leaf_audit() RETURNS trigger AS $$ BEGIN
			   INSERT INTO leaf_alloc_audit VALUES (NEW.biz_tag, OLD.max_id, NEW.max_id); RETURN NEW; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER leaf_audit AFTER UPDATE ON leaf_alloc FOR EACH ROW EXECUTE FUNCTION leaf_audit()`)
	} else {
		stmts = append(stmts, `CREATE TRIGGER leaf_audit AFTER UPDATE ON leaf_alloc FOR EACH ROW
			INSERT INTO leaf_alloc_audit VALUES (NEW.biz_tag, OLD.max_id, NEW.max_id)`)
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// AuditRanges returns the committed ranges of tag ordered by their start,
// without checking that they do not overlap (after a restore they do).
func AuditRanges(t testing.TB, db *sql.DB, dialect, tag string) []Range {
	t.Helper()
	q := `SELECT old_max, new_max FROM leaf_alloc_audit WHERE biz_tag = ? ORDER BY old_max`
	if dialect == "postgres" {
		q = `SELECT old_max, new_max FROM leaf_alloc_audit WHERE biz_tag = $1 ORDER BY old_max`
	}
	rows, err := db.Query(q, tag)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []Range
	for rows.Next() {
		var r Range
		if err := rows.Scan(&r.Lo, &r.Hi); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// InRanges reports whether id lies in one of rs, which must be sorted by Lo
// and not overlap.
func InRanges(rs []Range, id int64) bool {
	i, _ := slices.BinarySearchFunc(rs, id, func(r Range, id int64) int {
		switch {
		case r.Hi <= id:
			return -1
		case r.Lo > id:
			return 1
		}
		return 0
	})
	return i < len(rs) && rs[i].Lo <= id && id < rs[i].Hi
}
