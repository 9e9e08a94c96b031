package store

// Engine names, the values of [Engine.Name].
const (
	EngineSQLite        = "sqlite"
	EnginePostgres      = "postgres"
	EngineCockroachDB   = "cockroachdb"
	EngineYugabyteDB    = "yugabytedb"
	EngineMySQL         = "mysql"
	EngineMariaDB       = "mariadb"
	EngineMariaDBGalera = "mariadb-galera" // MariaDB with wsrep_on=ON
	EngineMySQLGalera   = "mysql-galera"   // MySQL built with wsrep (Percona XtraDB Cluster, Codership) with wsrep_on=ON
	EngineTiDB          = "tidb"
)

// Engine describes the database server behind a store, as the store's
// Engine method detects it (leaf-server logs it at start; docs/contract.md
// §8).
type Engine struct {
	// Name is one of the Engine… constants.
	Name string
	// Version is the server's own version string (VERSION(), version(),
	// tidb_version()'s first line, sqlite_version()).
	Version string
	// Warnings name settings that endanger uniqueness or availability, each
	// with its fix; nil when there are none.
	Warnings []string
}
