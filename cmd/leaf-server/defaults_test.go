package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/servertest"
)

const (
	pgDSN    = "postgres://leaf:s3cret@db.example:5432/leaf"
	mysqlDSN = "mysql://leaf:s3cret@tcp(db.example:3306)/leaf"
)

// TestDefaultWorkerIDSource: a shared store and no worker-ID setting means
// the SQL lease in that database; static only when asked for (issue 20 item
// 5: before, every replica on one PostgreSQL ran static worker 0).
func TestDefaultWorkerIDSource(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		want       string
		wantSource string
	}{
		{"postgres", []string{"--segment-dsn", pgDSN}, nil, "sql", sourceSQLLease},
		{"mysql from env", nil, map[string]string{"LEAF_SEGMENT_DSN": mysqlDSN}, "sql", sourceSQLLease},
		{"sqlite", []string{"--segment-dsn", "sqlite:x.db"}, nil, "static", "default"},
		{"no dsn", nil, nil, "static", "default"},
		{"static asked", []string{"--segment-dsn", pgDSN, "--worker-id-source", "static"}, nil, "static", "flag"},
		{"worker id given", []string{"--segment-dsn", pgDSN, "--worker-id", "3"}, nil, "static", "default"},
		{"worker id from env", []string{"--segment-dsn", pgDSN}, map[string]string{"LEAF_WORKER_ID": "0"}, "static", "default"},
		{"etcd asked", []string{"--segment-dsn", pgDSN, "--worker-id-source", "etcd", "--etcd-endpoints", "127.0.0.1:2379"}, nil, "etcd", "flag"},
		{"snowflake off", []string{"--segment-dsn", pgDSN, "--snowflake=false"}, nil, "static", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := parseConfig(tt.args, env(tt.env), func(string) {})
			if err != nil {
				t.Fatalf("parseConfig(%q) error %v", tt.args, err)
			}
			if l.WorkerIDSource != tt.want || l.sources["worker-id-source"] != tt.wantSource {
				t.Errorf("parseConfig(%q) worker-id-source = %q from %q, want %q from %q",
					tt.args, l.WorkerIDSource, l.sources["worker-id-source"], tt.want, tt.wantSource)
			}
		})
	}
}

// TestRefuseImplicitSQLiteOnPublicAddress: no --segment-dsn on a
// non-loopback address is refused with what to set; loopback, an explicit
// DSN (SQLite too: one deliberate server) and a server without a store pass.
func TestRefuseImplicitSQLiteOnPublicAddress(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		refuse bool
	}{
		{"all interfaces", []string{"--listen", "0.0.0.0:8080"}, nil, true},
		{"empty host", []string{"--listen", ":8080"}, nil, true},
		{"ipv6 any", []string{"--listen", "[::]:8080"}, nil, true},
		{"an interface", []string{"--listen", "10.1.2.3:8080"}, nil, true},
		{"a host name", []string{"--listen", "leaf.example:8080"}, nil, true},
		{"from env", nil, map[string]string{"LEAF_LISTEN": "0.0.0.0:8080"}, true},
		{"sql lease without dsn", []string{"--listen", ":8080", "--segment=false", "--worker-id-source", "sql"}, nil, true},
		{"loopback", []string{"--listen", "127.0.0.1:8080"}, nil, false},
		{"localhost", []string{"--listen", "localhost:8080"}, nil, false},
		{"ipv6 loopback", []string{"--listen", "[::1]:8080"}, nil, false},
		{"explicit sqlite", []string{"--listen", ":8080", "--segment-dsn", "sqlite:/data/leaf.db"}, nil, false},
		{"shared database", []string{"--listen", ":8080", "--segment-dsn", pgDSN}, nil, false},
		{"no store", []string{"--listen", ":8080", "--segment=false"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, env(tt.env), func(string) {})
			if !tt.refuse {
				if err != nil {
					t.Errorf("parseConfig(%q) error %v, want none", tt.args, err)
				}
				return
			}
			if !errors.Is(err, errNoDSN) {
				t.Fatalf("parseConfig(%q) error %v, want %v", tt.args, err, errNoDSN)
			}
			for _, want := range []string{"--segment-dsn", "LEAF_SEGMENT_DSN", "sqlite:<path>", "postgres://", "several servers"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestLeafPropertiesListen: started from leaf.properties without
// server.port, leaf-server listens as Leaf (Spring Boot) does, on every
// interface at port 8080, unless --listen or LEAF_LISTEN says otherwise
// (issue 23 item 4: it listened on 127.0.0.1:8080). The refusal of an
// implicit SQLite store on that address still applies, and names the key.
func TestLeafPropertiesListen(t *testing.T) {
	file := writeFile(t, leafShipped)
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		listen string
		source string
	}{
		{"no server.port", []string{"--config", file}, nil, ":8080", sourceLeafListen},
		{"listen flag", []string{"--config", file, "--listen", "127.0.0.1:7000"}, nil, "127.0.0.1:7000", "flag"},
		{"listen env", []string{"--config", file}, map[string]string{"LEAF_LISTEN": "127.0.0.1:7001"}, "127.0.0.1:7001", "env LEAF_LISTEN"},
		{"config from env", nil, map[string]string{"LEAF_CONFIG": file}, ":8080", sourceLeafListen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := parseConfig(tt.args, env(tt.env), func(string) {})
			if err != nil {
				t.Fatalf("parseConfig(%q) error %v", tt.args, err)
			}
			if l.Listen != tt.listen || l.sources["listen"] != tt.source {
				t.Errorf("parseConfig(%q) listen = %q from %q, want %q from %q", tt.args, l.Listen, l.sources["listen"], tt.listen, tt.source)
			}
		})
	}
	noDB := writeFile(t, "leaf.name=orders\nleaf.snowflake.enable=false\n")
	_, err := parseConfig([]string{"--config", noDB}, env(nil), func(string) {})
	if !errors.Is(err, errNoDSN) || !strings.Contains(err.Error(), "leaf.jdbc.url") {
		t.Errorf("leaf.properties without a database on :8080: error %v, want %v naming leaf.jdbc.url", err, errNoDSN)
	}
}

// TestUnknownLeafPropertiesKey: a key leaf-server does not know is refused
// with the nearest known one (it was a warning, and the setting silently
// kept its default).
func TestUnknownLeafPropertiesKey(t *testing.T) {
	file := writeFile(t, leafShipped+"leaf.jdbc.ur=jdbc:mysql://127.0.0.1:3306/other\n")
	_, err := parseConfig([]string{"--config", file}, env(nil), func(string) {})
	if err == nil || !strings.Contains(err.Error(), `unknown key "leaf.jdbc.ur": did you mean leaf.jdbc.url?`) {
		t.Errorf("parseConfig with leaf.jdbc.ur error %v, want one naming it and leaf.jdbc.url", err)
	}
}

// TestCheckEnviron: an unknown LEAF_* variable is refused with the nearest
// setting's name and without its value; every setting's variable,
// LEAF_CONFIG, leafctl's LEAF_SERVER and the test suite's LEAF_TEST_* pass.
func TestCheckEnviron(t *testing.T) {
	err := checkEnviron([]string{"PATH=/bin", "LEAF_SEGMENT_DNS=postgres://leaf:s3cret@db/leaf", "LEAF_LISTEN=:8080"})
	if err == nil || !strings.Contains(err.Error(), "LEAF_SEGMENT_DNS: did you mean LEAF_SEGMENT_DSN?") {
		t.Errorf("checkEnviron(LEAF_SEGMENT_DNS) = %v, want the nearest name LEAF_SEGMENT_DSN", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("checkEnviron error repeats the value: %v", err)
	}
	if err := checkEnviron([]string{"LEAF_WORKERID=3"}); err == nil || !strings.Contains(err.Error(), "LEAF_WORKER_ID?") {
		t.Errorf("checkEnviron(LEAF_WORKERID) = %v, want LEAF_WORKER_ID suggested", err)
	}
	ok := []string{"LEAF_SEGMENT_DSN=sqlite:x", "LEAF_CONFIG=/etc/leaf.properties", "LEAF_SERVER=http://x",
		"LEAF_TEST_POSTGRES_DSN=postgres://x", "LEAF_WORKER_ID_SOURCE=sql", "LEAF_ADMIN_TOKEN=t", "HOME=/root"}
	if err := checkEnviron(ok); err != nil {
		t.Errorf("checkEnviron(%q) = %v, want nil", ok, err)
	}
}

// TestUnknownEnvRefusedByBinary: the real binary exits non-zero on
// LEAF_SEGMENT_DNS before it listens, naming the variable and LEAF_SEGMENT_DSN.
func TestUnknownEnvRefusedByBinary(t *testing.T) {
	servertest.SkipShort(t)
	cmd := exec.Command(serverBin, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	cmd.Env = append(cmd.Environ(), "LEAF_SEGMENT_DNS=postgres://leaf@127.0.0.1:1/leaf")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("leaf-server with LEAF_SEGMENT_DNS: %v, want exit 1; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "LEAF_SEGMENT_DNS: did you mean LEAF_SEGMENT_DSN?") || strings.Contains(string(out), "listening") {
		t.Errorf("output does not refuse LEAF_SEGMENT_DNS before listening:\n%s", out)
	}
}

// TestSQLWorkerSourceNeedsDatabase: with a shared database and the default
// worker-ID source (sql), a database that does not answer at start stops
// the start (segment mode alone would wait for it), and the message says
// why and what to set instead. Runs without a database: the DSN names a
// closed port.
func TestSQLWorkerSourceNeedsDatabase(t *testing.T) {
	servertest.SkipShort(t)
	cmd := exec.Command(serverBin, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--segment-dsn", "postgres://leaf@127.0.0.1:1/leaf?sslmode=disable")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("leaf-server on a closed database port: %v, want exit 1; output:\n%s", err, out)
	}
	for _, want := range []string{"takes its worker ID from this database", "--worker-id N", "--snowflake=false"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
}
