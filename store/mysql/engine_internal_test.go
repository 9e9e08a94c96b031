package mysql

import (
	"strings"
	"testing"
)

func TestEngineOf(t *testing.T) {
	tests := []struct {
		name, version, comment string
		vars                   map[string]string
		wantName, wantVersion  string
		wantWarn               []string // substrings, one per warning
	}{
		{"mysql", "8.0.36", "MySQL Community Server - GPL", nil, "mysql", "8.0.36", nil},
		{"mariadb", "10.11.19-MariaDB-0+deb12u1", "Debian 12", map[string]string{"wsrep_on": "OFF", "wsrep_sync_wait": "0"}, "mariadb", "10.11.19-MariaDB-0+deb12u1", nil},
		{"galera no sync wait", "10.11.19-MariaDB", "", map[string]string{"wsrep_on": "ON", "wsrep_sync_wait": "0"}, "mariadb-galera", "10.11.19-MariaDB", []string{"wsrep_sync_wait=1"}},
		{"galera sync wait", "10.11.19-MariaDB", "", map[string]string{"wsrep_on": "ON", "wsrep_sync_wait": "3"}, "mariadb-galera", "10.11.19-MariaDB", nil},
		{"galera mysql", "8.0.35-27", "Percona XtraDB Cluster", map[string]string{"wsrep_on": "ON", "wsrep_sync_wait": "1"}, "mysql-galera", "8.0.35-27", nil},
		{"tidb pessimistic", "8.0.11-TiDB-v7.5.1", "", map[string]string{"tidb_txn_mode": "pessimistic", "tidb_version": "Release Version: v7.5.1\nEdition: Community"}, "tidb", "Release Version: v7.5.1", nil},
		{"tidb default mode", "8.0.11-TiDB-v7.5.1", "", map[string]string{"tidb_txn_mode": ""}, "tidb", "8.0.11-TiDB-v7.5.1", nil},
		{"tidb optimistic", "8.0.11-TiDB-v7.5.1", "", map[string]string{"tidb_txn_mode": "optimistic", "tidb_disable_txn_auto_retry": "ON"}, "tidb", "8.0.11-TiDB-v7.5.1", []string{"tidb_txn_mode=pessimistic"}},
		{"tidb optimistic auto retry", "8.0.11-TiDB-v7.5.1", "", map[string]string{"tidb_txn_mode": "OPTIMISTIC", "tidb_disable_txn_auto_retry": "OFF"}, "tidb", "8.0.11-TiDB-v7.5.1", []string{"tidb_txn_mode=pessimistic", "tidb_disable_txn_auto_retry=ON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := engineOf(tt.version, tt.comment, tt.vars)
			if e.Name != tt.wantName || e.Version != tt.wantVersion || len(e.Warnings) != len(tt.wantWarn) {
				t.Fatalf("engineOf(%q) = %+v, want %s %q with %d warnings", tt.version, e, tt.wantName, tt.wantVersion, len(tt.wantWarn))
			}
			for i, w := range tt.wantWarn {
				if !strings.Contains(e.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to name %q", i, e.Warnings[i], w)
				}
			}
		})
	}
}
