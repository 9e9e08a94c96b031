package faults

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/testing/faultproxy"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// serverBin is the leaf-server binary built once by TestMain.
var serverBin string

func TestMain(m *testing.M) {
	start := time.Now()
	servertest.Run(m, &serverBin, func(code int) int {
		for _, dir := range clockBinDirs {
			os.RemoveAll(dir)
		}
		if path := os.Getenv("LEAF_FAULTS_REPORT"); path != "" {
			if err := os.WriteFile(path, []byte(report.markdown(time.Since(start))), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "write report:", err)
			}
		}
		return code
	})
}

// start runs one leaf-server in dir with args.
func start(t testing.TB, dir string, args ...string) *servertest.Proc {
	t.Helper()
	return servertest.Start(t, serverBin, servertest.Options{Dir: dir, Args: args})
}

// ---- the summary table ----

// row is one line of RELIABILITY.md's table: one scenario at one size.
type row struct {
	Scenario string
	Size     string
	IDs      int
	Dups     int
	Errors   map[string]int // "<status> <leaf code>" or "conn" → count
	Worst    time.Duration  // slowest error answer; 0 when none
	Recovery string         // time from the end of the fault to steady 200s, or "n/a"
	Cmd      string
	Note     string
}

type summary struct {
	mu   sync.Mutex // guards rows
	rows []row
}

var report summary

// add logs r on t (prefix FAULTS, so `go test -v | grep FAULTS` shows the
// table) and keeps it for the report file.
func (s *summary) add(t testing.TB, r row) {
	t.Helper()
	if r.Cmd == "" {
		r.Cmd = "go test -race -count=1 -run '^" + strings.SplitN(t.Name(), "/", 2)[0] + "$' ./faults/"
	}
	t.Logf("FAULTS | %s | %s | ids %d | dups %d | errors %s | worst error %s | recovery %s | %s",
		r.Scenario, r.Size, r.IDs, r.Dups, fmtErrors(r.Errors), fmtDur(r.Worst), r.Recovery, r.Note)
	s.mu.Lock()
	s.rows = append(s.rows, r)
	s.mu.Unlock()
}

func (s *summary) markdown(wall time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := slices.Clone(s.rows)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Scenario < rows[j].Scenario })
	var b strings.Builder
	fmt.Fprintf(&b, "Campaign wall time %s (%s, race=%v)\n\n", wall.Round(time.Second), time.Now().UTC().Format(time.RFC3339), servertest.Race)
	b.WriteString("| scenario | size | IDs | dups | errors (status code: count) | worst error latency | recovery | note | reproduce |\n")
	b.WriteString("| --- | --- | ---: | ---: | --- | ---: | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | `%s` |\n",
			r.Scenario, r.Size, r.IDs, r.Dups, fmtErrors(r.Errors), fmtDur(r.Worst), r.Recovery, r.Note, r.Cmd)
	}
	return b.String()
}

func fmtErrors(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return d.Round(time.Millisecond).String()
}

// ---- answers ----

var leafCodeRe = regexp.MustCompile(`Result\{id=(-?\d+), status=EXCEPTION\}`)

// parseAnswer reads one answer of the Leaf route (batch false) or of the
// batch route (batch true). It returns the IDs of a 200, or the error key
// "<status> <leaf code>" of a failure; bad is set when the answer breaks the
// contract (a 200 that is not IDs, a failure without a Leaf code).
func parseAnswer(batch bool, status int, body string) (ids []int64, errKey string, bad string) {
	if status == 200 {
		if !batch {
			n, err := strconv.ParseInt(body, 10, 64)
			if err != nil || n <= 0 {
				return nil, "", fmt.Sprintf("200 with body %.80q, want a positive decimal ID", body)
			}
			return []int64{n}, "", ""
		}
		var a struct{ IDs []string }
		if err := json.Unmarshal([]byte(body), &a); err != nil || len(a.IDs) == 0 {
			return nil, "", fmt.Sprintf("200 with body %.80q, want {\"ids\":[…]}", body)
		}
		ids = make([]int64, len(a.IDs))
		for i, s := range a.IDs {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n <= 0 {
				return nil, "", fmt.Sprintf("batch ID %q is not a positive integer", s)
			}
			ids[i] = n
		}
		return ids, "", ""
	}
	if !batch {
		m := leafCodeRe.FindStringSubmatch(body)
		if status != 500 || m == nil {
			return nil, fmt.Sprintf("%d ?", status), fmt.Sprintf("failure %d %.120q has no Leaf code", status, body)
		}
		return nil, "500 " + m[1], ""
	}
	var e struct {
		LeafCode int64 `json:"leafCode"`
		Code     string
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.LeafCode == 0 {
		return nil, fmt.Sprintf("%d ?", status), fmt.Sprintf("batch failure %d %.120q has no leafCode", status, body)
	}
	return nil, fmt.Sprintf("%d %d", status, e.LeafCode), ""
}

// ---- collecting ----

// tally collects the answers of one scenario size: IDs, errors by key, the
// slowest error, contract violations, and the times recovery is measured
// from. Safe for concurrent use.
type tally struct {
	bound      time.Duration // an error answered later than this is a violation
	batchBound time.Duration // the same for batch requests

	mu        sync.Mutex // guards everything below
	ids       []int64
	errs      map[string]int
	worst     time.Duration
	bad       []string
	lastErr   time.Time
	faultEnd  time.Time // set by endFault
	firstOK   time.Time // first 200 after faultEnd
	firstErr  time.Time // first error after startFault
	faultFrom time.Time
}

func newTally(bound, batchBound time.Duration) *tally {
	return &tally{bound: bound, batchBound: batchBound, errs: map[string]int{}}
}

// record classifies one answer that took took.
func (tl *tally) record(batch bool, status int, body string, took time.Duration, path string) {
	ids, key, bad := parseAnswer(batch, status, body)
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if bad != "" {
		tl.violate("%s: %s", path, bad)
	}
	if ids != nil {
		tl.ids = append(tl.ids, ids...)
		if !tl.faultEnd.IsZero() && tl.firstOK.IsZero() {
			tl.firstOK = now
		}
		return
	}
	tl.errs[key]++
	tl.lastErr = now
	if !tl.faultFrom.IsZero() && tl.firstErr.IsZero() {
		tl.firstErr = now
	}
	tl.worst = max(tl.worst, took)
	limit := tl.bound
	if batch {
		limit = tl.batchBound
	}
	if took > limit {
		tl.violate("%s: error %s answered after %v, bound %v", path, key, took.Round(time.Millisecond), limit)
	}
}

// conn records a transport error (no HTTP answer at all).
func (tl *tally) conn(allowed bool, path string, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.errs["conn"]++
	if !allowed {
		tl.violate("%s: no HTTP answer: %v", path, err)
	}
}

// violate must be called with mu held; it keeps the first 20 messages.
func (tl *tally) violate(format string, args ...any) {
	if len(tl.bad) < 20 {
		tl.bad = append(tl.bad, fmt.Sprintf(format, args...))
	} else if len(tl.bad) == 20 {
		tl.bad = append(tl.bad, "… (more)")
	}
}

func (tl *tally) startFault() {
	tl.mu.Lock()
	tl.faultFrom, tl.firstErr = time.Now(), time.Time{}
	tl.mu.Unlock()
}

// firstErrAt is when the first error after startFault was recorded (zero if none).
func (tl *tally) firstErrAt() time.Time {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.firstErr
}

func (tl *tally) endFault() {
	tl.mu.Lock()
	tl.faultEnd, tl.firstOK = time.Now(), time.Time{}
	tl.mu.Unlock()
}

// recovery is how long after endFault the answers became 200 again and
// stayed so: max(first 200, last error) − end of fault.
func (tl *tally) recovery() time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.faultEnd.IsZero() || tl.firstOK.IsZero() {
		return -1
	}
	r := tl.firstOK.Sub(tl.faultEnd)
	if tl.lastErr.After(tl.faultEnd) {
		r = max(r, tl.lastErr.Sub(tl.faultEnd))
	}
	return max(r, 0)
}

func (tl *tally) lastError() time.Time {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.lastErr
}

// errCount is the number of answers that carried no ID, transport errors
// included.
func (tl *tally) errCount() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	n := 0
	for _, v := range tl.errs {
		n += v
	}
	return n
}

func (tl *tally) idCount() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.ids)
}

// add merges a round's IDs, error counts and worst error latency (from
// another tally's snapshot) into tl.
func (tl *tally) add(ids []int64, errs map[string]int, worst time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.ids = append(tl.ids, ids...)
	for k, v := range errs {
		tl.errs[k] += v
	}
	tl.worst = max(tl.worst, worst)
}

// endKillRound closes one round of a kill-and-restart scenario: it reports
// the round's violations, wants at least one ID served before the kill and
// every ID at or above prevMax (the max_id held at the previous kill, so a
// restarted server never reuses a range), adds the round to all and returns
// maxID(), the floor for the next round.
//
// Call it right after the kill (Kill9 returns once the process is gone),
// with no settling time: the killed server handed out IDs only from ranges
// whose commits it had heard of, all before the kill, so max_id read now is
// above all of them. A statement still in flight that commits later only
// raises max_id past a range nobody was given; reading before it makes the
// floor stricter, not wrong.
func endKillRound(t *testing.T, round int, tl, all *tally, prevMax int64, maxID func() int64) int64 {
	t.Helper()
	ids, errs, worst, bad := tl.snapshot()
	for _, b := range bad {
		t.Errorf("round %d: %s", round, b)
	}
	if len(ids) == 0 {
		t.Errorf("round %d: no ID served before the kill", round)
	}
	for _, id := range ids {
		if id < prevMax {
			t.Errorf("round %d: ID %d is below max_id %d held at the previous kill", round, id, prevMax)
			break
		}
	}
	all.add(ids, errs, worst)
	return maxID()
}

// snapshot returns copies of the IDs and errors.
func (tl *tally) snapshot() ([]int64, map[string]int, time.Duration, []string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.ids), maps.Clone(tl.errs), tl.worst, slices.Clone(tl.bad)
}

// target is what one client asks: a server (which may change between
// requests, e.g. across restarts; a transport error of a request to a server
// replaced meanwhile is allowed), a path and whether it is the batch route.
type target struct {
	srv   func() *servertest.Proc
	path  string
	batch bool
	tally *tally
	// connOK says transport errors are expected now (the server is being
	// killed or restarted).
	connOK func() bool
}

// drive runs one goroutine per target until ctx is done, each sending
// requests back to back. It returns when they have all stopped.
func drive(ctx context.Context, targets []target) {
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Go(func() {
			for ctx.Err() == nil {
				p := tg.srv()
				if p == nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				t0 := time.Now()
				status, body, err := p.Get(ctx, tg.path)
				took := time.Since(t0)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					// Allowed while connOK says so, and for a request to a
					// process the test replaced meanwhile (killed on purpose:
					// however late its error comes, no answer was due).
					tg.tally.conn(tg.connOK != nil && tg.connOK() || tg.srv() != p, tg.path, err)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				tg.tally.record(tg.batch, status, body, took, tg.path)
				if status != 200 {
					time.Sleep(2 * time.Millisecond) // do not spin on a fast failure
				}
			}
		})
	}
	wg.Wait()
}

// ---- databases and audit ----

// db is a fresh database on one of the real servers, with leaf_alloc
// migrated and the audit trigger installed.
type db struct {
	kind   string // postgres or mysql
	direct string // leaf-go DSN straight to the server
	raw    *sql.DB
	st     store.Store
}

// upstream is the host:port of the real server behind a DSN.
func (d *db) upstream() string {
	if d.kind == "postgres" {
		return "127.0.0.1:5432"
	}
	return "127.0.0.1:3306"
}

// via returns the DSN with the server address replaced by a proxy's.
func (d *db) via(t testing.TB, px *faultproxy.Proxy) string {
	t.Helper()
	out := strings.Replace(d.direct, d.upstream(), px.Addr(), 1)
	if out == d.direct {
		t.Fatalf("cannot route %s through the proxy", dsn.Redact(d.direct))
	}
	return out
}

func newDB(t testing.TB, kind string) *db {
	t.Helper()
	d := &db{kind: kind}
	driver := "pgx"
	switch kind {
	case "postgres":
		d.direct = dbtest.Postgres(t)
		d.raw = openRaw(t, driver, d.direct)
	case "mysql":
		d.direct = dbtest.MySQL(t)
		driver = "mysql"
		d.raw = openRaw(t, driver, strings.TrimPrefix(d.direct, "mysql://"))
	default:
		t.Fatalf("unknown database kind %q", kind)
	}
	st, err := dsn.Open(context.Background(), d.direct, true)
	if err != nil {
		t.Fatalf("open %s: %v", dsn.Redact(d.direct), err)
	}
	t.Cleanup(func() { st.Close() })
	d.st = st
	d.installAudit(t)
	return d
}

func openRaw(t testing.TB, driver, src string) *sql.DB {
	t.Helper()
	raw, err := sql.Open(driver, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// installAudit records every committed UPDATE of leaf_alloc as the range
// it reserved (dbtest.InstallAudit).
func (d *db) installAudit(t testing.TB) { t.Helper(); dbtest.InstallAudit(t, d.raw, d.kind) }

func (d *db) create(t testing.TB, tag string, maxID, step int64) {
	t.Helper()
	if err := d.st.Create(context.Background(), store.Row{BizTag: tag, MaxID: maxID, Step: step}); err != nil {
		t.Fatalf("create tag %q: %v", tag, err)
	}
}

func (d *db) maxID(t testing.TB, tag string) int64 {
	t.Helper()
	var n int64
	q := `SELECT max_id FROM leaf_alloc WHERE biz_tag = ?`
	if d.kind == "postgres" {
		q = `SELECT max_id FROM leaf_alloc WHERE biz_tag = $1`
	}
	if err := d.raw.QueryRow(q, tag).Scan(&n); err != nil {
		t.Fatalf("read max_id of %q: %v", tag, err)
	}
	return n
}

type idRange = dbtest.Range // [Lo, Hi)

func (d *db) ranges(t testing.TB, tag string) []idRange {
	t.Helper()
	out := d.auditRanges(t, tag)
	for i := 1; i < len(out); i++ {
		if out[i].Lo < out[i-1].Hi {
			t.Errorf("audit: committed ranges overlap: %v and %v", out[i-1], out[i])
		}
	}
	return out
}

// auditRanges returns the committed ranges of tag by their start, without
// checking that they do not overlap (after a restore they do).
func (d *db) auditRanges(t testing.TB, tag string) []idRange {
	t.Helper()
	return dbtest.AuditRanges(t, d.raw, d.kind, tag)
}

var inRanges = dbtest.InRanges

// duplicates sorts ids and returns how many repeat an earlier one, with the
// first few repeated values.
func duplicates(ids []int64) (int, []int64) {
	slices.Sort(ids)
	n := 0
	var first []int64
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			n++
			if len(first) < 5 {
				first = append(first, ids[i])
			}
		}
	}
	return n, first
}

// check verifies the IDs of tl (segment IDs of tag in d when d is not nil)
// and the violations tl saw, and returns the row's numbers.
func check(t testing.TB, tl *tally, d *db, tag string) row {
	t.Helper()
	ids, errs, worst, bad := tl.snapshot()
	for _, b := range bad {
		t.Errorf("contract: %s", b)
	}
	dups, first := duplicates(ids)
	if dups > 0 {
		t.Errorf("%d duplicate IDs, e.g. %v", dups, first)
	}
	if d != nil {
		rs := d.ranges(t, tag)
		outside := 0
		for _, id := range ids {
			if !inRanges(rs, id) {
				if outside < 5 {
					t.Errorf("ID %d of %q is in no range a committed UPDATE reserved (%d ranges)", id, tag, len(rs))
				}
				outside++
			}
		}
		if outside > 0 {
			t.Errorf("%d IDs of %q outside every committed range", outside, tag)
		}
	}
	return row{IDs: len(ids), Dups: dups, Errors: errs, Worst: worst}
}

// untilErr waits until tl has seen an error after startFault, or fails after
// limit.
func (tl *tally) waitFirstErr(t testing.TB, limit time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		tl.mu.Lock()
		fe, from := tl.firstErr, tl.faultFrom
		tl.mu.Unlock()
		if !fe.IsZero() {
			return fe.Sub(from)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no error within %v of the fault", limit)
	return 0
}

// waitRecovered waits until the last error is at least quiet old and a 200
// came after endFault, or fails after limit; it returns the recovery time.
func (tl *tally) waitRecovered(t testing.TB, quiet, limit time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if r := tl.recovery(); r >= 0 && time.Since(tl.lastError()) >= quiet {
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("not recovered within %v after the fault ended (recovery %v, last error %v ago)",
		limit, tl.recovery(), time.Since(tl.lastError()).Round(time.Millisecond))
	return -1
}

func fmtRecovery(d time.Duration) string {
	if d < 0 {
		return "NOT RECOVERED"
	}
	return d.Round(time.Millisecond).String()
}
