package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
)

const promtoolInstall = "install Prometheus's promtool: apt-get install -y --no-install-recommends prometheus (.ci/run does)"

// TestAlertRules: promtool accepts deploy/prometheus/leaf-go.rules.yml and
// its unit tests (each alert fires at its threshold and duration, and not
// below) pass.
func TestAlertRules(t *testing.T) {
	promtool := tool(t, "promtool", promtoolInstall)
	run(t, promtool, "check", "rules", repo("deploy/prometheus/leaf-go.rules.yml"))
	out := run(t, promtool, "test", "rules", repo("deploy/prometheus/leaf-go.rules_test.yml"))
	if !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool test rules: %s", out)
	}
}

// TestAlertTable: the alerts deploy/kubernetes.md's table lists are the
// rules of deploy/prometheus/leaf-go.rules.yml, each with the duration the
// table gives ("for 2 min" is for: 2m).
func TestAlertTable(t *testing.T) {
	raw, err := os.ReadFile(repo("deploy/prometheus/leaf-go.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				For   string `yaml:"for"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			rules[r.Alert] = r.For
		}
	}
	doc, err := os.ReadFile(repo("deploy/kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\s*\\| `(Leaf[A-Za-z]+)` \\| (.*) \\|$").FindAllStringSubmatch(string(doc), -1)
	if len(rows) == 0 {
		t.Fatal("deploy/kubernetes.md: no alert table")
	}
	for _, r := range rows {
		forDur, ok := rules[r[1]]
		if !ok {
			t.Errorf("deploy/kubernetes.md lists %s; leaf-go.rules.yml has no such alert", r[1])
			continue
		}
		delete(rules, r[1])
		m := regexp.MustCompile(`for (\d+) min$`).FindStringSubmatch(r[2])
		if m == nil || m[1]+"m" != forDur {
			t.Errorf("deploy/kubernetes.md: %s fires %q; the rule says for: %s", r[1], r[2], forDur)
		}
	}
	for name := range rules {
		t.Errorf("leaf-go.rules.yml has %s; deploy/kubernetes.md's table does not list it", name)
	}
}

// metricName finds the names of leaf-go's, Go's and the process's series in
// a PromQL expression.
var metricName = regexp.MustCompile(`\b(?:leaf|go|process)_[a-z0-9_]+\b`)

// TestOperationsPackMetrics starts two real leaf-servers on one PostgreSQL
// database (segment mode, snowflake worker IDs from the SQL lease, so that
// each sees the other as a peer), serves some IDs and checks that every
// series named by a query of the Grafana dashboard (deploy/grafana) and by
// an alert rule (deploy/prometheus) is on the live /metrics.
func TestOperationsPackMetrics(t *testing.T) {
	dsn := dbtest.Postgres(t)
	args := []string{"--segment-dsn", dsn, "--worker-id-source", "sql", "--demo-tag"}
	a := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args})
	b := servertest.Start(t, serverBin, servertest.Options{Dir: t.TempDir(), Args: args})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The second server's first range scan sees the first as a live peer. A first claim
	// (no history) serves snowflake IDs only after TTL + margin; the exposition is read
	// once the second server has issued one, so that its snowflake series are those of a
	// serving generator (the high-water headroom appears with the first stored mark).
	var (
		exposition string
		sfServed   bool
	)
	for {
		for _, p := range []*servertest.Proc{a, b} {
			for _, path := range []string{"/api/segment/get/leaf-segment-test", "/api/snowflake/get/x", "/api/segment/get/unknown"} {
				code, _, err := p.Get(ctx, path)
				if p == b && path == "/api/snowflake/get/x" && err == nil && code == 200 {
					sfServed = true
				}
			}
		}
		code, body, err := b.Get(ctx, "/metrics")
		if err == nil && code == 200 && sfServed && strings.Contains(body, "leaf_snowflake_peer_clock_offset_seconds ") &&
			strings.Contains(body, "leaf_segment_load_duration_seconds_bucket") {
			exposition = body
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("/metrics of the second server never showed the peer offset and a segment load after a snowflake ID (served: %v): %d %v\n%s", sfServed, code, err, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(exposition, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		exported[name] = true
	}

	queries := dashboardQueries(t)
	if len(queries) < 10 {
		t.Fatalf("the dashboard has %d queries, want its panels' targets", len(queries))
	}
	queries = append(queries, ruleQueries(t)...)
	named := map[string]bool{}
	for _, q := range queries {
		names := metricName.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("query %q names no leaf_, go_ or process_ series", q)
		}
		for _, n := range names {
			named[n] = true
			if !exported[n] {
				t.Errorf("query %q names %s, which the live /metrics lacks", q, n)
			}
		}
	}
	list := make([]string, 0, len(named))
	for n := range named {
		list = append(list, n)
	}
	sort.Strings(list)
	t.Logf("%d queries name %d series, all on the live /metrics: %s", len(queries), len(list), strings.Join(list, " "))
}

// dashboardQueries returns the expr of every target of every panel of the
// Grafana dashboard, rows' nested panels included.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(repo("deploy/grafana/leaf-go.json"))
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/leaf-go.json: %v", err)
	}
	var out []string
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("deploy/grafana/leaf-go.json panel: %v", err)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q has a target without a query", p.Title)
				}
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	return out
}

// ruleQueries returns the expr of every alert rule.
func ruleQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(repo("deploy/prometheus/leaf-go.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	if len(out) < 6 {
		t.Fatalf("%d alert rules, want the six of deploy/kubernetes.md", len(out))
	}
	return out
}
