// Package dsn parses leaf-go's store DSNs and opens the matching store.
//
// Accepted forms (the --segment-dsn flag):
//
//	sqlite:<path>                       SQLite file, created with its directory (sqlite:./data/leaf.db)
//	sqlite::memory:                     private in-memory SQLite database (tests)
//	postgres://user:pass@host:5432/db?sslmode=disable   PostgreSQL (also postgresql://), pgx's URL form
//	mysql://user:pass@tcp(host:3306)/db?param=value      MySQL/MariaDB: go-sql-driver's DSN after mysql://
//
// Several hosts (docs/contract.md §8): a MySQL DSN may list them,
// mysql://user:pass@tcp(h1:3306,h2:3306,h3:3306)/db, and the store connects
// to the first that answers and is writable (see store/mysql's Open). A
// PostgreSQL URL takes pgx's own list,
// postgres://user:pass@h1:5432,h2:5432/db?target_session_attrs=read-write,
// which tries the hosts in order and keeps the first that accepts writes;
// Parse passes it through unchanged.
//
// Errors name the scheme but never repeat the password; log DSNs through
// Redact.
package dsn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/mysql"
	"github.com/leaf-go/leaf/store/postgres"
	"github.com/leaf-go/leaf/store/sqlite"
)

// Dialects, the values of Config.Dialect. They are also the dialect names
// migrations.Up accepts.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
	MySQL    = "mysql"
)

// ErrScheme is returned by Parse and Open for a DSN whose scheme is not
// sqlite:, postgres://, postgresql:// or mysql://.
var ErrScheme = errors.New("dsn: unsupported scheme")

// Config is a parsed DSN.
type Config struct {
	// Dialect is SQLite, Postgres or MySQL.
	Dialect string
	// DSN is what the dialect's Open takes: a file path or ":memory:" for
	// SQLite, the postgres:// URL for PostgreSQL, and go-sql-driver's DSN
	// (without mysql://, with parseTime=true) for MySQL. It may hold a
	// password: log it through Redact.
	DSN string
}

// Parse parses s into a Config without touching the network or the file
// system. Errors wrap [ErrScheme] for an unknown scheme, or say what is wrong
// with the DSN of a known one; none contains the password.
func Parse(s string) (Config, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Config{}, fmt.Errorf("%w: DSN has no scheme (want sqlite:<path>, postgres://… or mysql://…)", ErrScheme)
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3":
		return parseSQLite(rest)
	case "postgres", "postgresql":
		return parsePostgres(s)
	case "mysql":
		return parseMySQL(rest)
	case "jdbc":
		return Config{}, fmt.Errorf("%w %q: write jdbc:mysql://host:port/db as mysql://user:pass@tcp(host:port)/db", ErrScheme, "jdbc")
	}
	if !isSchemeName(scheme) || !strings.HasPrefix(rest, "//") {
		// Perhaps not a scheme at all (user:password@tcp(…)/db, a bare
		// path): do not repeat it.
		return Config{}, fmt.Errorf("%w: DSN has no scheme (want sqlite:<path>, postgres://… or mysql://…)", ErrScheme)
	}
	return Config{}, fmt.Errorf("%w %q (want sqlite:, postgres://, postgresql:// or mysql://)", ErrScheme, scheme)
}

func parseSQLite(path string) (Config, error) {
	switch {
	case path == "":
		return Config{}, errors.New("dsn: sqlite: empty path (want sqlite:<path>, e.g. sqlite:./data/leaf.db)")
	case strings.HasPrefix(path, "//"):
		return Config{}, errors.New("dsn: sqlite: write sqlite:<path> (sqlite:/abs/leaf.db or sqlite:./rel/leaf.db), not sqlite://")
	case strings.ContainsAny(path, "?#\x00"):
		return Config{}, errors.New("dsn: sqlite: path must not contain '?', '#' or NUL")
	}
	return Config{Dialect: SQLite, DSN: path}, nil
}

func parsePostgres(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || !strings.HasPrefix(s[len(u.Scheme):], "://") {
		// url.Parse's message may quote part of the password: do not wrap it.
		return Config{}, errors.New("dsn: postgres: malformed URL (want postgres://user:pass@host:5432/db; percent-encode special characters in the password)")
	}
	if strings.ContainsRune(s, 0) {
		return Config{}, errors.New("dsn: postgres: URL contains NUL")
	}
	// pgx recognises only the lowercase schemes as URLs.
	return Config{Dialect: Postgres, DSN: strings.ToLower(u.Scheme) + s[len(u.Scheme):]}, nil
}

func parseMySQL(rest string) (Config, error) {
	const want = "want mysql://user:pass@tcp(host:3306)/db"
	if !strings.HasPrefix(rest, "//") {
		return Config{}, fmt.Errorf("dsn: mysql: missing // after mysql: (%s)", want)
	}
	rest = rest[2:]
	first, addrs, err := mysql.SplitHosts(rest)
	if err != nil {
		return Config{}, fmt.Errorf("dsn: %w (%s)", err, want)
	}
	cfg, err := gomysql.ParseDSN(first)
	if err != nil {
		// go-sql-driver's messages can quote the text around the password
		// (for example "default addr for network '<user:pass>' unknown"), so
		// keep only a hint.
		return Config{}, fmt.Errorf("dsn: mysql: invalid DSN (%s, options as go-sql-driver/mysql's DSN)", want)
	}
	if cfg.DBName == "" {
		return Config{}, fmt.Errorf("dsn: mysql: no database name (%s)", want)
	}
	cfg.ParseTime = true
	return Config{Dialect: MySQL, DSN: mysql.JoinHosts(cfg.FormatDSN(), addrs)}, nil
}

// isSchemeName reports whether s is a URL scheme per RFC 3986 §3.1, short
// enough to quote in an error.
func isSchemeName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// Open parses s and opens the store it names, applying the embedded
// migrations first when migrate is true. The caller closes the store.
// Errors: those of Parse, or the dialect's Open (which may name the host but
// not the password).
func Open(ctx context.Context, s string, migrate bool) (store.Store, error) {
	c, err := Parse(s)
	if err != nil {
		return nil, err
	}
	switch c.Dialect {
	case SQLite:
		return sqlite.Open(ctx, c.DSN, migrate)
	case Postgres:
		return postgres.Open(ctx, c.DSN, migrate)
	default:
		return mysql.Open(ctx, c.DSN, migrate)
	}
}

// New parses s and builds the store of a PostgreSQL or MySQL DSN without
// touching the network (postgres.New, mysql.New): every call of st fails
// at once with [store.ErrNotOpen] until start has succeeded once. start
// connects, checks that the database answers and applies the embedded
// migrations when migrate is true (the dialect's Store.Start); it may be
// called again after a failure, never twice at once. Open is New and start
// in one; New is for a caller that serves while its database is down
// (leaf-server retries start in the background). The caller closes st.
// Errors: those of Parse, a malformed DSN, and one for a sqlite: DSN (a
// local file has nothing to wait for: use Open).
func New(s string) (st store.Store, start func(ctx context.Context, migrate bool) error, err error) {
	c, err := Parse(s)
	if err != nil {
		return nil, nil, err
	}
	switch c.Dialect {
	case SQLite:
		return nil, nil, errors.New("dsn: sqlite: a local file opens at once (use Open)")
	case Postgres:
		pg, err := postgres.New(c.DSN)
		if err != nil {
			return nil, nil, err
		}
		return pg, pg.Start, nil
	default:
		my, err := mysql.New(c.DSN)
		if err != nil {
			return nil, nil, err
		}
		return my, my.Start, nil
	}
}

// redacted replaces a password in Redact's output.
const redacted = "xxxxx"

// Redact returns s with any password replaced by "xxxxx", for logs and error
// pages: the password of user:password@ (up to the last '@', which also
// covers unescaped '@' in passwords and malformed DSNs) and the value of every
// password= parameter. SQLite DSNs are returned unchanged. When unsure, it
// hides more rather than less.
func Redact(s string) string {
	if c, err := Parse(s); err == nil && c.Dialect == SQLite {
		return s
	}
	out := s
	start := 0
	if i := strings.Index(out, "://"); i >= 0 {
		start = i + 3
	}
	if at := strings.LastIndex(out, "@"); at >= start {
		userinfo := out[start:at]
		if colon := strings.IndexByte(userinfo, ':'); colon >= 0 {
			out = out[:start+colon+1] + redacted + out[at:]
		}
	}
	return redactParam(out, "password=")
}

// redactParam replaces the value of every key=value occurrence of key (a
// query parameter or a libpq keyword, any case) up to the next '&', ' ' or
// end, or to the closing quote of a libpq '…' value.
func redactParam(s, key string) string {
	var b strings.Builder
	for {
		i := indexFold(s, key)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+len(key)])
		s = s[i+len(key):]
		end := strings.IndexAny(s, "& ")
		if strings.HasPrefix(s, "'") {
			end = strings.IndexByte(s[1:], '\'')
			if end >= 0 {
				end += 2
			}
		}
		if end < 0 {
			end = len(s)
		}
		b.WriteString(redacted)
		s = s[end:]
	}
}

// indexFold is strings.Index ignoring ASCII case; sub must be ASCII.
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}
