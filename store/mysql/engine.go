package mysql

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/leaf-go/leaf/store"
)

// Engine detects the server behind s: MySQL, MariaDB, a Galera node
// (wsrep_on), or TiDB (its VERSION() says TiDB), and warns about the session
// settings of s's connections (DSN parameters included) that endanger
// uniqueness or availability: TiDB in optimistic mode, TiDB's automatic
// retry of optimistic transactions, and Galera without wsrep_sync_wait for
// the max_id read of segment's restore check. Errors: the server's.
func (s *Store) Engine(ctx context.Context) (store.Engine, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return store.Engine{}, fmt.Errorf("engine: %w", err)
	}
	defer conn.Close()
	var version, comment string
	if err := conn.QueryRowContext(ctx, `SELECT VERSION(), @@version_comment`).Scan(&version, &comment); err != nil {
		return store.Engine{}, fmt.Errorf("engine: %w", err)
	}
	vars := map[string]string{}
	rows, err := conn.QueryContext(ctx, `SHOW VARIABLES WHERE Variable_name IN
		('wsrep_on', 'wsrep_sync_wait', 'tidb_txn_mode', 'tidb_disable_txn_auto_retry')`)
	if err != nil {
		return store.Engine{}, fmt.Errorf("engine: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return store.Engine{}, fmt.Errorf("engine: %w", err)
		}
		vars[strings.ToLower(k)] = v
	}
	if err := rows.Err(); err != nil {
		return store.Engine{}, fmt.Errorf("engine: %w", err)
	}
	if isTiDB(version) {
		var tv string
		if err := conn.QueryRowContext(ctx, `SELECT tidb_version()`).Scan(&tv); err == nil {
			vars["tidb_version"] = tv
		}
	}
	return engineOf(version, comment, vars), nil
}

func isTiDB(version string) bool { return strings.Contains(version, "TiDB") }

// engineOf classifies a server from VERSION(), @@version_comment and the
// session variables Engine reads.
func engineOf(version, comment string, vars map[string]string) store.Engine {
	e := store.Engine{Name: store.EngineMySQL, Version: version}
	if strings.Contains(strings.ToLower(version+" "+comment), "mariadb") {
		e.Name = store.EngineMariaDB
	}
	switch {
	case isTiDB(version):
		e.Name = store.EngineTiDB
		if tv := vars["tidb_version"]; tv != "" {
			first, _, _ := strings.Cut(tv, "\n")
			e.Version = strings.TrimSpace(first)
		}
		if strings.EqualFold(vars["tidb_txn_mode"], "optimistic") {
			e.Warnings = append(e.Warnings, "TiDB runs optimistic transactions (tidb_txn_mode=optimistic): "+
				"concurrent allocations of one tag fail at COMMIT (9007) and are re-run, costing load time; "+
				"run pessimistic transactions: SET GLOBAL tidb_txn_mode = 'pessimistic', or add tidb_txn_mode=pessimistic to the DSN")
			if !on(vars["tidb_disable_txn_auto_retry"]) {
				e.Warnings = append(e.Warnings, "TiDB retries optimistic transactions itself (tidb_disable_txn_auto_retry=OFF), "+
					"replaying only the UPDATE, which can lose updates and hand out a range twice; "+
					"SET GLOBAL tidb_disable_txn_auto_retry = ON, or add tidb_disable_txn_auto_retry=ON to the DSN")
			}
		}
	case on(vars["wsrep_on"]):
		e.Name = store.EngineMySQLGalera
		if strings.Contains(strings.ToLower(version+" "+comment), "mariadb") {
			e.Name = store.EngineMariaDBGalera
		}
		if n, err := strconv.Atoi(vars["wsrep_sync_wait"]); err != nil || n&1 == 0 {
			e.Warnings = append(e.Warnings, "Galera without causality checks for reads (wsrep_sync_wait="+orNone(vars["wsrep_sync_wait"])+"): "+
				"the max_id read that the restore check does before each allocation may see a stale row on a lagging node "+
				"and refuse the tag as rewound; add wsrep_sync_wait=1 to the DSN (mysql://…/db?wsrep_sync_wait=1)")
		}
	}
	return e
}
