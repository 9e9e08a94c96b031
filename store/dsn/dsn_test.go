package dsn_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// secret is the password in the table inputs; no error may contain it.
const secret = "s3cr3tPw"

var parseTests = []struct {
	give    string
	want    dsn.Config
	wantErr string // substring of the error; "" means success
}{
	{give: "sqlite:./data/leaf.db", want: dsn.Config{Dialect: dsn.SQLite, DSN: "./data/leaf.db"}},
	{give: "sqlite:/var/lib/leaf/leaf.db", want: dsn.Config{Dialect: dsn.SQLite, DSN: "/var/lib/leaf/leaf.db"}},
	{give: "sqlite::memory:", want: dsn.Config{Dialect: dsn.SQLite, DSN: ":memory:"}},
	{give: "SQLite:leaf.db", want: dsn.Config{Dialect: dsn.SQLite, DSN: "leaf.db"}},
	{give: "sqlite:", wantErr: "sqlite: empty path"},
	{give: "sqlite://leaf.db", wantErr: "not sqlite://"},
	{give: "sqlite:leaf.db?_pragma=x", wantErr: "must not contain"},
	{give: "postgres://u:" + secret + "@db:5432/leaf?sslmode=disable", want: dsn.Config{Dialect: dsn.Postgres, DSN: "postgres://u:" + secret + "@db:5432/leaf?sslmode=disable"}},
	{give: "PostgreSQL://u@db/leaf", want: dsn.Config{Dialect: dsn.Postgres, DSN: "postgresql://u@db/leaf"}},
	{give: "postgresql://u@db/leaf", want: dsn.Config{Dialect: dsn.Postgres, DSN: "postgresql://u@db/leaf"}},
	{give: "postgres://u:pa/" + secret + "@db/leaf", wantErr: "postgres: malformed URL"},
	{give: "postgres:leaf", wantErr: "postgres: malformed URL"},
	{give: "mysql://root:" + secret + "@tcp(127.0.0.1:3306)/leaf", want: dsn.Config{Dialect: dsn.MySQL, DSN: "root:" + secret + "@tcp(127.0.0.1:3306)/leaf?parseTime=true"}},
	{give: "mysql://root@tcp(db:3306)/leaf?parseTime=true&timeout=5s", want: dsn.Config{Dialect: dsn.MySQL, DSN: "root@tcp(db:3306)/leaf?parseTime=true&timeout=5s"}},
	{give: "mysql://root:" + secret + "@tcp(h1:3306,h2,h3:3307)/leaf", want: dsn.Config{Dialect: dsn.MySQL, DSN: "root:" + secret + "@tcp(h1:3306,h2:3306,h3:3307)/leaf?parseTime=true"}},
	{give: "mysql://root:" + secret + "@tcp(h1:3306,,h3:3307)/leaf", wantErr: "empty host"},
	{give: "postgres://u:" + secret + "@h1:5432,h2:5433/leaf?target_session_attrs=read-write", want: dsn.Config{Dialect: dsn.Postgres, DSN: "postgres://u:" + secret + "@h1:5432,h2:5433/leaf?target_session_attrs=read-write"}},
	{give: "mysql://root:" + secret + "/leaf", wantErr: "mysql: invalid DSN"},
	{give: "mysql://root:" + secret + "@tcp(db:3306", wantErr: "mysql: invalid DSN"},
	{give: "mysql://root:" + secret + "@tcp(db:3306)/", wantErr: "no database name"},
	{give: "mysql:root@tcp(db)/leaf", wantErr: "missing //"},
	{give: "jdbc:mysql://db:3306/leaf", wantErr: "jdbc"},
	{give: "redis://db:6379", wantErr: `unsupported scheme "redis"`},
	{give: "root:" + secret + "@tcp(db)/leaf", wantErr: "no scheme"},
	{give: "./leaf.db", wantErr: "no scheme"},
	{give: "", wantErr: "no scheme"},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := dsn.Parse(tt.give)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %+v, %v, want error containing %q", tt.give, got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Parse(%q) error %q contains the password", tt.give, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %+v, %v, want %+v, nil", tt.give, got, err, tt.want)
			}
		})
	}
}

func TestParseUnknownSchemeIsErrScheme(t *testing.T) {
	for _, give := range []string{"redis://x", "nodb", "jdbc:mysql://x/y"} {
		if _, err := dsn.Parse(give); !errors.Is(err, dsn.ErrScheme) {
			t.Errorf("Parse(%q) = %v, want %v", give, err, dsn.ErrScheme)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"sqlite:./data/leaf.db", "sqlite:./data/leaf.db"},
		{"postgres://u:" + secret + "@db:5432/leaf?sslmode=disable", "postgres://u:xxxxx@db:5432/leaf?sslmode=disable"},
		{"postgres://u@db/leaf", "postgres://u@db/leaf"},
		{"postgres://u:pa/" + secret + "@db/leaf", "postgres://u:xxxxx@db/leaf"},
		{"postgres://u:p@" + secret + "@db/leaf", "postgres://u:xxxxx@db/leaf"},
		{"postgres://db/leaf?user=u&password=" + secret + "&sslmode=disable", "postgres://db/leaf?user=u&password=xxxxx&sslmode=disable"},
		{"postgres://db/leaf?PASSWORD=" + secret, "postgres://db/leaf?PASSWORD=xxxxx"},
		{"host=db password='" + secret + " x' dbname=leaf", "host=db password=xxxxx dbname=leaf"},
		{"mysql://root:" + secret + "@tcp(127.0.0.1:3306)/leaf", "mysql://root:xxxxx@tcp(127.0.0.1:3306)/leaf"},
		{"mysql://root@tcp(127.0.0.1:3306)/leaf", "mysql://root@tcp(127.0.0.1:3306)/leaf"},
		{"root:" + secret + "@tcp(db)/leaf", "root:xxxxx@tcp(db)/leaf"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := dsn.Redact(tt.give); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(tt.give)
	}
	f.Add("mysql://u:p@unix(/tmp/mysql.sock)/db?loc=Local")
	f.Add("postgres://[::1]:5432/db")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := dsn.Parse(s)
		r := dsn.Redact(s)
		if err != nil {
			return
		}
		switch c.Dialect {
		case dsn.SQLite, dsn.Postgres, dsn.MySQL:
		default:
			t.Fatalf("Parse(%q) = %+v, unknown dialect", s, c)
		}
		if c.Dialect == dsn.MySQL {
			// Parsing the normalised DSN again must succeed and be stable.
			c2, err := dsn.Parse("mysql://" + c.DSN)
			if err != nil || c2 != c {
				t.Fatalf("Parse(Parse(%q).DSN) = %+v, %v, want %+v", s, c2, err, c)
			}
		}
		if c.Dialect == dsn.Postgres && strings.Contains(s, ":"+secret+"@") && strings.Contains(r, secret) {
			t.Fatalf("Redact(%q) = %q keeps the password", s, r)
		}
	})
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		give func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return dbtest.SQLite(t) }},
		{"postgres", func(t *testing.T) string { return dbtest.Postgres(t) }},
		{"mysql", func(t *testing.T) string { return dbtest.MySQL(t) }},
		// Several hosts, the first a closed port: pgx's multi-host URL with
		// target_session_attrs, and the MySQL store's tcp(…) list.
		{"postgres-hosts", func(t *testing.T) string {
			u, err := url.Parse(dbtest.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			u.Host = closedAddr(t) + "," + u.Host
			q := u.Query()
			q.Set("target_session_attrs", "read-write")
			u.RawQuery = q.Encode()
			return u.String()
		}},
		{"mysql-hosts", func(t *testing.T) string {
			d := dbtest.MySQL(t)
			i := strings.Index(d, "tcp(")
			if i < 0 {
				t.Fatalf("no tcp( in %q", dsn.Redact(d))
			}
			return d[:i+4] + closedAddr(t) + "," + d[i+4:]
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			give := tt.give(t)
			s, err := dsn.Open(ctx, give, true)
			if err != nil {
				t.Fatalf("Open(%q) = %v", dsn.Redact(give), err)
			}
			defer s.Close()
			if err := s.Create(ctx, store.Row{BizTag: "t", Step: 10}); err != nil {
				t.Fatalf("Create() = %v", err)
			}
			if a, err := s.Allocate(ctx, "t", 0, 0); err != nil || a.Start() != 1 {
				t.Errorf("Allocate(%q) = %+v, %v, want a segment starting at 1", "t", a, err)
			}
		})
	}
	if _, err := dsn.Open(ctx, "redis://x", true); !errors.Is(err, dsn.ErrScheme) {
		t.Errorf("Open(%q) = %v, want %v", "redis://x", err, dsn.ErrScheme)
	}
}

// TestNew builds the store of each server dialect on a closed port: New
// itself connects nowhere, every call then fails at once with
// store.ErrNotOpen, and a failed start leaves it so. SQLite and malformed
// DSNs fail New.
func TestNew(t *testing.T) {
	ctx := context.Background()
	addr := closedAddr(t)
	for _, give := range []string{
		"postgres://u:" + secret + "@" + addr + "/leaf?sslmode=disable",
		"mysql://u:" + secret + "@tcp(" + addr + ")/leaf",
	} {
		st, start, err := dsn.New(give)
		if err != nil {
			t.Fatalf("New(%q) = %v", dsn.Redact(give), err)
		}
		if err := st.Ping(ctx); !errors.Is(err, store.ErrNotOpen) {
			t.Errorf("Ping of New(%q) = %v, want %v", dsn.Redact(give), err, store.ErrNotOpen)
		}
		if err := start(ctx, true); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("start of New(%q) = %v, want an error without the password", dsn.Redact(give), err)
		}
		if _, err := st.Allocate(ctx, "t", 0, 0); !errors.Is(err, store.ErrNotOpen) || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), secret) {
			t.Errorf("Allocate after a failed start of New(%q) = %v, want %v naming %s, without the password", dsn.Redact(give), err, store.ErrNotOpen, addr)
		}
		if err := st.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}
	for _, give := range []string{"sqlite:" + t.TempDir() + "/leaf.db", "redis://x", "mysql://root@tcp(h1,,h2)/leaf"} {
		if st, _, err := dsn.New(give); err == nil {
			_ = st.Close()
			t.Errorf("New(%q) = nil error, want one", give)
		}
	}
}
