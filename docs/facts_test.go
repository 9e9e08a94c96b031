package docs_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/etcdworker"
	"github.com/leaf-go/leaf/snowflake/k8sworker"
	"github.com/leaf-go/leaf/snowflake/lease"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/snowflake/zkworker"
	"github.com/leaf-go/leaf/store"
)

// A fact is a number a document states that the code defines: wherever re
// matches in file (at least once; the file's whitespace runs read as one
// space), its first group must read want. A
// sentence reworded so that re no longer matches fails too: then the fact
// is restated here, next to the constant it comes from.
type fact struct {
	file string
	re   string
	want string
}

// secs, millis and minutes print a duration as the documents count it.
func secs(d time.Duration) string    { return strconv.FormatInt(int64(d/time.Second), 10) }
func millis(d time.Duration) string  { return strconv.FormatInt(int64(d/time.Millisecond), 10) }
func minutes(d time.Duration) string { return strconv.FormatInt(int64(d/time.Minute), 10) }

// grouped prints n with thousands separated by commas, as the documents do.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// flagDefaults reads the defaults column of configuration.md, which is
// generated from leaf-server's flag definitions (TestConfigurationDoc in
// cmd/leaf-server fails while it is stale): flag name without dashes →
// default without backticks.
func flagDefaults(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\| [^|]* \\| `?([^|`]*)`? \\|")
	for _, r := range row.FindAllStringSubmatch(string(b), -1) {
		m[r[1]] = r[2]
	}
	if len(m) < 30 {
		t.Fatalf("configuration.md: read %d flags, want its whole table", len(m))
	}
	return m
}

// flagSecs is a flag's default duration in whole seconds.
func flagSecs(t *testing.T, flags map[string]string, name string) string {
	t.Helper()
	d, err := time.ParseDuration(flags[name])
	if err != nil {
		t.Fatalf("configuration.md: --%s default %q: %v", name, flags[name], err)
	}
	return secs(d)
}

func facts(t *testing.T) []fact {
	flags := flagDefaults(t)
	end := snowflake.DefaultLayout().End()
	return []fact{
		// segment mode
		{"segment.md", `doubles it\s+\(up to ([\d,]+)\)`, grouped(segment.DefaultMaxStep)},
		{"segment.md", `load less than (\d+) minutes after`, minutes(segment.DefaultGrowWindow)},
		{"segment.md", `(\d+)–\d+ minutes keeps it`, minutes(segment.DefaultGrowWindow)},
		{"segment.md", `\d+–(\d+) minutes keeps it`, minutes(segment.DefaultShrinkWindow)},
		{"segment.md", `(\d+) minutes or more halves`, minutes(segment.DefaultShrinkWindow)},
		{"scaling.md", `up to (10\^6) IDs`, map[bool]string{true: "10^6"}[segment.DefaultMaxStep == 1_000_000]},
		{"scaling.md", `loads come less than (\d+) minutes apart`, minutes(segment.DefaultGrowWindow)},
		{"contract.md", `\| wait for a load in flight \| (\d+) s \|`, secs(segment.DefaultWaitTimeout)},
		{"contract.md", `\| wait for a load in flight \| (\d+) s \|`, flagSecs(t, flags, "wait-timeout")},
		{"contract.md", `\| one allocation or tag-list read \| (\d+) s \|`, secs(segment.DefaultLoadTimeout)},
		{"contract.md", `\| tag refresh \| (\d+) s \|`, secs(segment.DefaultRefreshInterval)},
		{"contract.md", `\| tag refresh \| (\d+) s \|`, flagSecs(t, flags, "refresh-interval")},
		{"contract.md", `share the next, (\d+) per statement`, strconv.Itoa(store.FindChunk)},
		{"contract.md", `SELECT … WHERE biz_tag IN \(…\)` + "`" + ` with at most\s+(\d+) names`, strconv.Itoa(store.FindChunk)},
		{"compatibility.md", `, (\d+) names per statement`, strconv.Itoa(store.FindChunk)},
		{"contract.md", `\| backoff after a failed load \| (\d+) ms doubling`, millis(segment.DefaultRetryMin)},
		{"contract.md", `\| backoff after a failed load \| \d+ ms doubling to (\d+) s`, secs(segment.DefaultRetryMax)},
		{"contract.md", `\((\d+) ms doubling to \d+ s,\s+jittered\)`, millis(segment.DefaultRetryMin)},
		{"contract.md", `\(\d+ ms doubling to (\d+) s,\s+jittered\)`, secs(segment.DefaultRetryMax)},
		{"contract.md", `\| backoff of a refusing tag \| up to (\d+) s`, secs(segment.DefaultRefuseRetryMax)},
		{"contract.md", `backoff that\s+grows to (\d+) s`, secs(segment.DefaultRefuseRetryMax)},
		{"operations.md", `backoff that grows to (\d+) s`, secs(segment.DefaultRefuseRetryMax)},
		{"contract.md", `\| largest dynamic step \| ([\d,]+)`, grouped(segment.DefaultMaxStep)},
		{"contract.md", `doubled step stays\s+at or below ([\d,]+)`, grouped(segment.DefaultMaxStep)},
		{"contract.md", `\| grow / shrink windows \| (\d+) min`, minutes(segment.DefaultGrowWindow)},
		{"contract.md", `\| grow / shrink windows \| \d+ min / (\d+) min`, minutes(segment.DefaultShrinkWindow)},
		{"contract.md", "`d < (\\d+) min` doubles", minutes(segment.DefaultGrowWindow)},
		{"contract.md", "`\\d+ min ≤ d < (\\d+) min` keeps", minutes(segment.DefaultShrinkWindow)},
		{"contract.md", "for at most `--wait-timeout` \\(default (\\d+) s\\)", flagSecs(t, flags, "wait-timeout")},
		{"http.md", "`--wait-timeout` \\(default (\\d+) s\\)", flagSecs(t, flags, "wait-timeout")},
		{"http.md", `\(each bounded by (\d+) s\)`, secs(segment.DefaultLoadTimeout)},
		{"contract.md", `Every (\d+) s \(` + "`--refresh-interval`", flagSecs(t, flags, "refresh-interval")},
		{"operations.md", "\\(`--refresh-interval`, (\\d+) s\\)", flagSecs(t, flags, "refresh-interval")},
		{"contract.md", `1 ≤ N ≤ ([\d,]+)\s+\(` + "`api.DefaultMaxBatch`", grouped(api.DefaultMaxBatch)},
		{"http.md", `1 ≤ N ≤ ([\d,]+);`, grouped(api.DefaultMaxBatch)},
		{"http.md", `With at most (\d+) tags in the store\s+\(` + "`--metrics-all-tags-max`", strconv.Itoa(api.DefaultMetricsAllTagsMax)},
		{"http.md", `With at most (\d+) tags in the store\s+\(` + "`--metrics-all-tags-max`", flags["metrics-all-tags-max"]},
		{"http.md", `chooses: the (\d+) tags`, strconv.Itoa(api.DefaultMetricsTopTags)},
		{"http.md", `the (\d+) tags with the lowest runway and the \d+`, flags["metrics-top-tags"]},
		{"http.md", `within the top\s+(\d+)`, strconv.Itoa(2 * api.DefaultMetricsTopTags)},
		// snowflake mode
		{"snowflake.md", `epoch (\d+)\s`, strconv.FormatInt(snowflake.DefaultEpochMillis, 10)},
		{"contract.md", `by default (\d+), Twitter's`, strconv.FormatInt(snowflake.DefaultEpochMillis, 10)},
		{"snowflake.md", `the layout runs out\s+in (\d{4})`, strconv.Itoa(end.Year())},
		{"contract.md", `It runs out in\s+(\w+ \d{4})`, end.Format("January 2006")},
		{"snowflake.md", `random value below (\d+)`, strconv.Itoa(snowflake.RandomStartBound)},
		{"contract.md", `drawn at random below (\d+)`, strconv.Itoa(snowflake.RandomStartBound)},
		{"snowflake.md", `up to (\d+) ms behind the last issued`, millis(snowflake.DefaultMaxBackwardWait)},
		{"snowflake.md", `more than (\d+) ms: -3 at once`, millis(snowflake.DefaultMaxBackwardWait)},
		{"contract.md", `by at most (\d+) ms: wait twice`, millis(snowflake.DefaultMaxBackwardWait)},
		{"contract.md", `Behind by more than (\d+) ms: -3 at once`, millis(snowflake.DefaultMaxBackwardWait)},
		{"snowflake.md", `all three up to\s+(\d+) s ahead`, secs(snowflake.DefaultHighWaterWindow)},
		{"contract.md", `new mark (\d+) s ahead of the clock \(` + "`snowflake.DefaultHighWaterWindow`", secs(snowflake.DefaultHighWaterWindow)},
		{"contract.md", `After an ordinary restart that lasts up to (\d+) s`, secs(snowflake.DefaultHighWaterWindow)},
		{"snowflake.md", `after a crash, up to\s+(\d+) s,`, secs(snowflake.DefaultHighWaterWindow)},
		{"snowflake.md", `3 s, (\d+) s for etcd`, secs(etcdworker.DefaultMarkAhead)},
		{"snowflake.md", `or (\d+) s for kubernetes`, secs(k8sworker.DefaultMarkAhead)},
		{"snowflake.md", `annotation of its Lease, (\d+) s ahead`, secs(k8sworker.DefaultMarkAhead)},
		{"snowflake.md", "`highwater` key, (\\d+) s ahead", secs(etcdworker.DefaultMarkAhead)},
		{"snowflake.md", "`--max-peer-clock-skew` \\((\\d+) s, Twitter's", flagSecs(t, flags, "max-peer-clock-skew")},
		{"snowflake.md", "`--max-peer-clock-skew`, default (\\d+) s", flagSecs(t, flags, "max-peer-clock-skew")},
		{"contract.md", "`--max-peer-clock-skew` \\((\\d+) s; 0: off\\)", flagSecs(t, flags, "max-peer-clock-skew")},
		{"contract.md", "`--max-peer-clock-skew` \\(default (\\d+) s; 0", flagSecs(t, flags, "max-peer-clock-skew")},
		{"contract.md", "`--max-peer-clock-skew` \\((\\d+) s\\) off their", flagSecs(t, flags, "max-peer-clock-skew")},
		// zookeeper
		{"snowflake.md", `re-uploaded every (\d+) s`, secs(zkworker.DefaultHeartbeatInterval)},
		{"contract.md", `uploaded again every (\d+) s`, secs(zkworker.DefaultHeartbeatInterval)},
		{"snowflake.md", `session timeout \((\d+) s\) minus a \d+ s margin`, secs(zkworker.DefaultSessionTimeout)},
		{"snowflake.md", `session timeout \(\d+ s\) minus a (\d+) s margin`, secs(zkworker.DefaultMargin)},
		{"snowflake.md", `waits up to (\d+) s\s+\(session timeout \+ 2 s`, secs(zkworker.DefaultSessionTimeout + 2*time.Second)},
		{"snowflake.md", `full session\s+timeout \+ margin \((\d+) s\)`, secs(zkworker.DefaultSessionTimeout + zkworker.DefaultMargin)},
		{"contract.md", `session timeout\s+\((\d+) s\) minus a margin \(\d+ s\)`, secs(zkworker.DefaultSessionTimeout)},
		{"contract.md", `session timeout\s+\(\d+ s\) minus a margin \((\d+) s\)`, secs(zkworker.DefaultMargin)},
		{"contract.md", `ZooKeeper session comes within (\d+) s at start`, secs(zkworker.DefaultConnectTimeout)},
		// sql lease
		{"snowflake.md", `renewed every (\d+) s with a \d+ s TTL`, secs(sqllease.DefaultRenew)},
		{"snowflake.md", `renewed every \d+ s with a (\d+) s TTL`, secs(sqllease.DefaultTTL)},
		{"snowflake.md", `serves only (\d+) s \(TTL \+ margin\)`, secs(sqllease.DefaultTTL + sqllease.DefaultMargin)},
		{"snowflake.md", `for up to\s+(\d+) s \(TTL \+ 2 s`, secs(sqllease.DefaultTTL + sqllease.DefaultClaimSlack)},
		{"snowflake.md", `lies\s+more than (a minute) ahead`, map[bool]string{true: "a minute"}[sqllease.DefaultMaxMarkAhead == time.Minute]},
		{"contract.md", `lies more than\s+(\d+) minute ahead`, minutes(sqllease.DefaultMaxMarkAhead)},
		{"contract.md", `for up to (\d+) s \(TTL \+ 2 s: a holder`, secs(sqllease.DefaultTTL + sqllease.DefaultClaimSlack)},
		{"contract.md", `The lease lasts (\d+) s of the database's clock`, secs(sqllease.DefaultTTL)},
		{"contract.md", `database's clock and is renewed\s+every (\d+) s`, secs(sqllease.DefaultRenew)},
		{"contract.md", `(\d+) s \(the margin\) before the end of the TTL`, secs(sqllease.DefaultMargin)},
		{"contract.md", `serves only (\d+) s \(TTL \+ margin\) after the claim`, secs(sqllease.DefaultTTL + sqllease.DefaultMargin)},
		{"contract.md", `is\s+free (\d+) s after its last renewal`, secs(sqllease.DefaultTTL)},
		// etcd
		{"snowflake.md", `attached to a (\d+) s lease kept alive every \d+ s`, secs(etcdworker.DefaultTTL)},
		{"snowflake.md", `attached to a \d+ s lease kept alive every (\d+) s`, secs(etcdworker.DefaultRenew)},
		{"snowflake.md", `stops issuing (\d+) s \(TTL − 2 s margin\)`, secs(etcdworker.DefaultTTL - etcdworker.DefaultMargin)},
		{"snowflake.md", `\(raised (\d+) s ahead of the clock`, secs(etcdworker.DefaultMarkAhead)},
		{"snowflake.md", `passed it \(up to (\d+) s; a mark further ahead`, secs(etcdworker.DefaultMaxMarkWait)},
		{"snowflake.md", `free (\d+) s after its last\s+keepalive`, secs(etcdworker.DefaultTTL)},
		{"contract.md", `attached to a lease of (\d+) s kept alive every \d+ s`, secs(etcdworker.DefaultTTL)},
		{"contract.md", `attached to a lease of \d+ s kept alive every (\d+) s`, secs(etcdworker.DefaultRenew)},
		{"contract.md", `The generator stops issuing (\d+) s \(the margin\)`, secs(etcdworker.DefaultMargin)},
		{"contract.md", `raised (\d+) s\s+ahead of the clock on every keepalive`, secs(etcdworker.DefaultMarkAhead)},
		{"contract.md", `passed it\s+\(up to (\d+) s; a mark further ahead`, secs(etcdworker.DefaultMaxMarkWait)},
		{"contract.md", `is free (\d+) s after its last keepalive`, secs(etcdworker.DefaultTTL)},
		{"contract.md", `on a lease of (\d+) s kept alive every\s+\d+ s; stop`, secs(etcdworker.DefaultTTL)},
		{"contract.md", `on a lease of \d+ s kept alive every\s+(\d+) s; stop`, secs(etcdworker.DefaultRenew)},
		// kubernetes
		{"../deploy/kubernetes.md", `default (\d+) s: renewal every \d+ s`, secs(k8sworker.DefaultLeaseDuration)},
		{"../deploy/kubernetes.md", `default (\d+) s: renewal every \d+ s`, flagSecs(t, flags, "kubernetes-lease-duration")},
		{"../deploy/kubernetes.md", `default \d+ s: renewal every (\d+) s`, secs(k8sworker.DefaultRenew)},
		{"../deploy/kubernetes.md", `every (fifth) of the lease duration`, map[bool]string{true: "fifth"}[k8sworker.DefaultLeaseDuration == 5*k8sworker.DefaultRenew]},
		{"../deploy/kubernetes.md", `stops issuing (\d+) s before the\s+lease`, secs(k8sworker.DefaultMargin)},
		// shared by the lease sources
		{"architecture.md", `\(TTL\s+(\d+) s, margin \d+ s, renewal every \d+ s\)`, secs(lease.DefaultTTL)},
		{"architecture.md", `\(TTL\s+\d+ s, margin (\d+) s, renewal every \d+ s\)`, secs(lease.DefaultMargin)},
		{"architecture.md", `\(TTL\s+\d+ s, margin \d+ s, renewal every (\d+) s\)`, secs(lease.DefaultRenew)},
		// business numbers
		{"business-numbers.md", `and (\d+) minutes\s+before the boundary`, minutes(group.DefaultPrepareAhead)},
		{"contract.md", `up to (\d+) minutes before the boundary`, minutes(group.DefaultPrepareAhead)},
		{"contract.md", "least (\\d+) minute \\(`group.Config.PruneMargin`\\)", minutes(group.DefaultPruneMargin)},
		{"business-numbers.md", `ended less than (a minute) ago`, map[bool]string{true: "a minute"}[group.DefaultPruneMargin == time.Minute]},
		// running it
		{"contract.md", "`--listen` \\(`([^`]+)`;", flags["listen"]},
		{"contract.md", "`--worker-id` \\((\\d+)\\)", flags["worker-id"]},
		{"contract.md", "`--leaf-name` \\(`([^`]+)`\\)", flags["leaf-name"]},
		{"contract.md", "`--data-dir`\\s+\\(`([^`]+)`\\)", flags["data-dir"]},
		{"architecture.md", "`--data-dir` \\(default `([^`]+)`\\)", flags["data-dir"]},
		{"contract.md", "within `--shutdown-timeout` \\((\\d+) s\\)", flagSecs(t, flags, "shutdown-timeout")},
	}
}

// TestFacts checks the numbers the documents state against the code's
// constants and the generated flag table.
func TestFacts(t *testing.T) {
	texts := map[string]string{}
	for _, f := range facts(t) {
		if f.want == "" {
			t.Errorf("%s: %s: the code no longer says what the fact's wording assumes", f.file, f.re)
			continue
		}
		text, ok := texts[f.file]
		if !ok {
			b, err := os.ReadFile(f.file)
			if err != nil {
				t.Fatal(err)
			}
			text = strings.Join(strings.Fields(string(b)), " ") // a fact may be wrapped anywhere
			texts[f.file] = text
		}
		ms := regexp.MustCompile(f.re).FindAllStringSubmatch(text, -1)
		if len(ms) == 0 {
			t.Errorf("%s: nothing matches %s: restate the fact in docs/facts_test.go with the new wording", f.file, f.re)
			continue
		}
		for _, m := range ms {
			if got := m[1]; got != f.want {
				t.Errorf("%s: %q says %s; the code says %s", f.file, strings.Join(strings.Fields(m[0]), " "), m[1], f.want)
			}
		}
	}
}
