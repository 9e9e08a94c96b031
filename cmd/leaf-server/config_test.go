package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/buildinfo"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/store/dsn"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "leaf.properties")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// leafShipped is Leaf's own leaf.properties with segment mode on, as a Leaf
// user has it.
const leafShipped = `leaf.name=com.sankuai.leaf.opensource.test
leaf.segment.enable=true
leaf.jdbc.url=jdbc:mysql://127.0.0.1:3306/test?useUnicode=true&characterEncoding=utf8
leaf.jdbc.username=root
leaf.jdbc.password=s3cret

leaf.snowflake.enable=false
#leaf.snowflake.zk.address=
#leaf.snowflake.port=
`

func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, leafShipped+"server.port=9090\n")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		listen  string
		source  string
		dsnWant string
	}{
		{"default", nil, nil, "127.0.0.1:8080", "default", "sqlite:data/leaf.db"},
		{"file", []string{"--config", file}, nil, ":9090", "file " + file + " (server.port)", "mysql://root:s3cret@tcp(127.0.0.1:3306)/test?charset=utf8mb4"},
		{"env over file", []string{"--config", file}, map[string]string{"LEAF_LISTEN": "127.0.0.1:7070"}, "127.0.0.1:7070", "env LEAF_LISTEN", ""},
		{"flag over env", []string{"--config", file, "--listen", "127.0.0.1:6060"}, map[string]string{"LEAF_LISTEN": "127.0.0.1:7070"}, "127.0.0.1:6060", "flag", ""},
		{"file from env", nil, map[string]string{"LEAF_CONFIG": file}, ":9090", "file " + file + " (server.port)", ""},
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
			if tt.dsnWant != "" && l.DSN() != tt.dsnWant {
				t.Errorf("parseConfig(%q) DSN = %q, want %q", tt.args, l.DSN(), tt.dsnWant)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		args []string
		want string
	}{
		{"segment on without url", "leaf.segment.enable=true\n", nil, "leaf.jdbc.url is empty"},
		{"snowflake on without zk", "leaf.snowflake.enable=true\n", nil, "zk.address is empty"},
		{"bad bool", "leaf.segment.enable=yes please\n", nil, "want true or false"},
		{"bad port", "server.port=http\n", nil, "not a port"},
		{"oracle", "leaf.jdbc.url=jdbc:oracle:thin:@h:1521:x\n", nil, "jdbc"},
		{"bad flag", "", []string{"--wait-timeout", "soon"}, "wait-timeout"},
		{"bad worker", "", []string{"--worker-id", "1024"}, "0..1023"},
		{"bad worker for layout", "", []string{"--worker-bits", "5", "--time-bits", "46", "--worker-id", "32"}, "0..31"},
		{"widths", "", []string{"--time-bits", "42"}, "sum to 64, must be at most 63"},
		// 32 time bits last 49.7 days: from an epoch 10 days ago the layout
		// ends in about 40, within a year (issue 22 item 3).
		{"layout ends within a year", "", []string{"--time-bits", "32", "--epoch-ms", strconv.FormatInt(time.Now().Add(-10*24*time.Hour).UnixMilli(), 10)},
			"it must last at least a year"},
		{"future epoch", "", []string{"--epoch-ms", "99999999999999"}, "not in the past"},
		{"zk without leaf name", "", []string{"--worker-id-source", "zookeeper", "--zk", "127.0.0.1:2181", "--leaf-name", ""}, "--leaf-name"},
		{"bad source", "", []string{"--worker-id-source", "dns"}, "worker-id-source"},
		{"zk without address", "", []string{"--worker-id-source", "zookeeper"}, "needs --zk"},
		{"no modes", "", []string{"--segment=false", "--snowflake=false"}, "both modes are disabled"},
		{"missing file", "", []string{"--config", "/nonexistent/leaf.properties"}, "nonexistent"},
		{"stray argument", "", []string{"serve"}, "unexpected arguments"},
		{"negative peer skew", "", []string{"--max-peer-clock-skew", "-1s"}, "--max-peer-clock-skew"},
		{"negative metrics top", "", []string{"--metrics-top-tags", "-1"}, "--metrics-top-tags"},
		{"negative metrics all", "", []string{"--metrics-all-tags-max", "-5"}, "--metrics-all-tags-max"},
		{"bad metrics pattern", "", []string{"--metrics-tags", "order-*,[a-"}, `--metrics-tags: bad biz_tag pattern "[a-"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", writeFile(t, tt.file)}, args...)
			}
			_, err := parseConfig(args, env(nil), func(string) {})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseConfig(%q) error = %v, want one containing %q", args, err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

func TestConfigEnvTypes(t *testing.T) {
	l, err := parseConfig(nil, env(map[string]string{"LEAF_WAIT_TIMEOUT": "250ms", "LEAF_SEGMENT": "false", "LEAF_WORKER_ID": "7"}), func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if l.LeafName != "com.sankuai.leaf.opensource.test" || l.Layout() != snowflake.DefaultLayout() || !l.RandomStart {
		t.Errorf("defaults: leaf name %q, layout %+v, random start %v; want Leaf's", l.LeafName, l.Layout(), l.RandomStart)
	}
	if l.MaxPeerClockSkew != 10*time.Second {
		t.Errorf("default MaxPeerClockSkew = %v, want 10s (Twitter's rule)", l.MaxPeerClockSkew)
	}
	if l, err := parseConfig(nil, env(map[string]string{"LEAF_MAX_PEER_CLOCK_SKEW": "0"}), func(string) {}); err != nil || l.MaxPeerClockSkew != 0 {
		t.Errorf("LEAF_MAX_PEER_CLOCK_SKEW=0: %v, %v; want the check off (0)", l.MaxPeerClockSkew, err)
	}
	if l.WaitTimeout != 250*time.Millisecond || l.SegmentEnabled || l.WorkerID != 7 {
		t.Errorf("env config = %+v, want wait 250ms, segment off, worker 7", l.Config)
	}
	if _, err := parseConfig(nil, env(map[string]string{"LEAF_WORKER_ID": "seven"}), func(string) {}); err == nil || !strings.Contains(err.Error(), "LEAF_WORKER_ID") {
		t.Errorf("LEAF_WORKER_ID=seven error = %v, want one naming the variable", err)
	}
}

func TestPrintConfigHidesSecrets(t *testing.T) {
	file := writeFile(t, leafShipped)
	var out strings.Builder
	err := run(t.Context(), []string{"--config", file, "--print-config", "--admin-token", "tok-123"}, env(nil), &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, secret := range []string{"s3cret", "tok-123"} {
		if strings.Contains(got, secret) {
			t.Errorf("--print-config shows secret %q:\n%s", secret, got)
		}
	}
	for _, want := range []string{"segment-dsn", "mysql://root:", "(leaf.jdbc.url)", "admin-token", "<hidden>", "flag"} {
		if !strings.Contains(got, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, got)
		}
	}
	// The file read is shown as --config's value, not as empty.
	if !regexp.MustCompile(`(?m)^config +` + regexp.QuoteMeta(file) + ` +flag$`).MatchString(got) {
		t.Errorf("--print-config does not show --config %s:\n%s", file, got)
	}
}

func TestJDBCToDSN(t *testing.T) {
	tests := []struct {
		give, user, pass string
		want             string
		warn             int
	}{
		{"jdbc:mysql://127.0.0.1:3306/test?useUnicode=true&characterEncoding=utf8", "root", "", "mysql://root@tcp(127.0.0.1:3306)/test?charset=utf8mb4", 0},
		{"jdbc:mysql://db.example:3307/leaf", "u", "p@ss/w:rd", "mysql://u:p@ss/w:rd@tcp(db.example:3307)/leaf", 0},
		{"jdbc:mysql://db/leaf?useSSL=false&connectTimeout=3000&rewriteBatchedStatements=true", "u", "", "mysql://u@tcp(db:3306)/leaf?timeout=3s&tls=false", 1},
		{"jdbc:postgresql://pg:5432/leaf?sslmode=disable", "leaf", "pw", "postgres://leaf:pw@pg:5432/leaf?sslmode=disable", 0},
	}
	for _, tt := range tests {
		got, warn, err := jdbcToDSN(tt.give, tt.user, tt.pass)
		if err != nil || got != tt.want || len(warn) != tt.warn {
			t.Errorf("jdbcToDSN(%q) = %q, %v, %v; want %q with %d warnings", tt.give, got, warn, err, tt.want, tt.warn)
			continue
		}
		if _, err := dsn.Parse(got); err != nil {
			t.Errorf("dsn.Parse(jdbcToDSN(%q)) error %v", tt.give, err)
		}
		if strings.HasPrefix(got, "mysql://") {
			cfg, err := mysql.ParseDSN(strings.TrimPrefix(got, "mysql://"))
			if err != nil || cfg.Passwd != tt.pass || cfg.User != tt.user {
				t.Errorf("mysql.ParseDSN(%q) = %+v, %v; want user %q password %q", got, cfg, err, tt.user, tt.pass)
			}
		}
	}
	for _, bad := range []string{"", "mysql://h/db", "jdbc:mysql://h", "jdbc:mysql:///db", "jdbc:sqlserver://h/db", "jdbc:mysql://user:pw@h/db", "jdbc:%zz"} {
		if got, _, err := jdbcToDSN(bad, "u", "secret"); err == nil {
			t.Errorf("jdbcToDSN(%q) = %q, want an error", bad, got)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("jdbcToDSN(%q) error leaks the password: %v", bad, err)
		}
	}
}

func FuzzJDBCToDSN(f *testing.F) {
	for _, s := range []string{"jdbc:mysql://127.0.0.1:3306/test?useUnicode=true&characterEncoding=utf8", "jdbc:postgresql://pg/leaf", "jdbc:mysql://h/db?connectTimeout=x"} {
		f.Add(s, "user", "pw")
	}
	f.Fuzz(func(t *testing.T, url, user, pass string) {
		got, _, err := jdbcToDSN(url, user, pass)
		if err != nil {
			return
		}
		if !strings.HasPrefix(got, "mysql://") && !strings.HasPrefix(got, "postgres://") {
			t.Errorf("jdbcToDSN(%q) = %q, want a mysql:// or postgres:// DSN", url, got)
		}
	})
}

// TestConfigTagMetrics: the --metrics-* flags reach api.TagMetrics, their 0
// (none, never) as the api's negative, the defaults as the api's.
func TestConfigTagMetrics(t *testing.T) {
	l, err := parseConfig(nil, env(nil), func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.tagMetrics(); got.Top != api.DefaultMetricsTopTags || got.AllMax != api.DefaultMetricsAllTagsMax || got.Patterns != nil {
		t.Errorf("default tagMetrics() = %+v, want top %d, all-max %d, no patterns", got, api.DefaultMetricsTopTags, api.DefaultMetricsAllTagsMax)
	}
	l, err = parseConfig([]string{"--metrics-top-tags", "0", "--metrics-all-tags-max", "0", "--metrics-tags", " order-*, pay/? ,"},
		env(nil), func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	got := l.tagMetrics()
	if got.Top >= 0 || got.AllMax >= 0 || !slices.Equal(got.Patterns, []string{"order-*", "pay/?"}) {
		t.Errorf("tagMetrics() = %+v, want top and all-max off (negative), patterns [order-* pay/?]", got)
	}
}

// TestVersionFlag checks that --version prints the build and exits 0 before
// reading anything else: even with a config file that does not exist.
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"--version", "--config", "/nonexistent/leaf.properties"}, env(nil), &out, &out); err != nil {
		t.Fatalf("leaf-server --version: %v\n%s", err, out.String())
	}
	if want := "leaf-server " + buildinfo.Read().String() + "\n"; out.String() != want {
		t.Errorf("leaf-server --version printed %q, want %q", out.String(), want)
	}
}
