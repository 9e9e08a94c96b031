package dbtest

import (
	"database/sql"
	"testing"
)

// InstallSQLiteAudit is InstallAudit for a SQLite database: the same table
// leaf_alloc_audit and an AFTER UPDATE trigger that records every committed
// UPDATE of leaf_alloc as [old max_id, new max_id), inside the UPDATE's own
// transaction. AuditRanges reads it with dialect "sqlite".
func InstallSQLiteAudit(t testing.TB, db *sql.DB) {
	t.Helper()
	for _, s := range []string{
		`CREATE TABLE leaf_alloc_audit (biz_tag varchar(128), old_max bigint, new_max bigint)`,
		`CREATE TRIGGER leaf_audit AFTER UPDATE ON leaf_alloc FOR EACH ROW BEGIN
		   INSERT INTO leaf_alloc_audit VALUES (NEW.biz_tag, OLD.max_id, NEW.max_id); END`,
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
