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

// Retry causes: why a store re-ran a transaction (or a statement) that the
// engine refused, the values of the cause label of leaf_store_retries_total
// (docs/contract.md §8). A small fixed set: the stores map each error code
// they retry onto one of these.
const (
	// RetryDeadlock is a deadlock victim: MySQL/MariaDB 1213 (also Galera's
	// certification conflict, "Deadlock: wsrep aborted transaction") and
	// PostgreSQL 40P01.
	RetryDeadlock = "deadlock"
	// RetryLockWaitTimeout is MySQL/MariaDB 1205: the row lock was not
	// granted within innodb_lock_wait_timeout.
	RetryLockWaitTimeout = "lock_wait_timeout"
	// RetryWriteConflict is a conflict with a concurrent transaction found
	// by the engine's concurrency control: TiDB 8002, 8005, 8022, 9007 and
	// 1105 "pessimistic lock retry limit reached", and SQLSTATE 40001
	// (PostgreSQL's serialization failure, CockroachDB's "restart
	// transaction", YugabyteDB's conflicts and read restarts).
	RetryWriteConflict = "write_conflict"
	// RetrySchemaChanged is TiDB 8028: a concurrent DDL changed the
	// information schema during the transaction.
	RetrySchemaChanged = "schema_changed"
	// RetryNodeNotReady is Galera's 1047: the node is not in the primary
	// component or not synced; the next host of the DSN is used.
	RetryNodeNotReady = "node_not_ready"
	// RetryAmbiguousCommit is CockroachDB's 40003 (statement completion
	// unknown): the statement may have committed, so a re-run can only leave
	// a range unused.
	RetryAmbiguousCommit = "ambiguous_commit"
	// RetryConnection is a lost or refused connection that the MySQL store
	// re-runs on (driver.ErrBadConn, or any with a multi-host DSN).
	RetryConnection = "connection"
)

// RetryCauses returns every retry cause, in a fixed order: the complete
// label set of leaf_store_retries_total. A fresh slice on each call.
func RetryCauses() []string {
	return []string{
		RetryDeadlock, RetryLockWaitTimeout, RetryWriteConflict, RetrySchemaChanged,
		RetryNodeNotReady, RetryAmbiguousCommit, RetryConnection,
	}
}
