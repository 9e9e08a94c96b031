package docs_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	_ "modernc.org/sqlite" // the server's SQLite file, opened to break leaf_alloc

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/snowflake"
)

// compatRow is one row of the table of wire differences in
// compatibility.md: the "where" cell names it, leafGo is its leaf-go cell
// as documented, and check asserts that answer against running servers.
// A row whose leaf-go cell changes must have its check changed with it.
type compatRow struct {
	where  string
	leafGo string
	check  func(t *testing.T, e *compatEnv)
}

// compatEnv is the servers the checks run against.
type compatEnv struct {
	bin  string
	main *servertest.Proc // defaults, --admin-token
	off  *servertest.Proc // --segment=false, a 40/11/12 layout
	dir  string           // main's working directory (its SQLite file is data/leaf.db)
}

// compatTable reads the rows of the table whose header starts with
// "| where |" in compatibility.md: the cells of each row.
func compatTable(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "| where |"):
			in = true
		case in && strings.HasPrefix(l, "| ---"):
		case in && strings.HasPrefix(l, "| "):
			cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |"), " | ")
			if len(cells) != 4 {
				t.Fatalf("compatibility.md: row %q has %d cells, want 4 (where, Leaf, leaf-go, why)", l, len(cells))
			}
			rows = append(rows, cells)
		case in:
			return rows
		}
	}
	return rows
}

// TestCompatibilityRows runs in -short mode too: every row of the table has
// a check with the same leaf-go cell, and every check a row.
func TestCompatibilityRows(t *testing.T) {
	rows := compatTable(t)
	if len(rows) == 0 {
		t.Fatal("compatibility.md: no table with a header | where | …")
	}
	checks := map[string]compatRow{}
	for _, c := range compatRows {
		checks[c.where] = c
	}
	seen := map[string]bool{}
	for _, r := range rows {
		c, ok := checks[r[0]]
		switch {
		case !ok:
			t.Errorf("compatibility.md: row %q has no check in compatRows (docs/compatibility_test.go)", r[0])
		case c.leafGo != r[2]:
			t.Errorf("compatibility.md: row %q says leaf-go answers %q; its check was written for %q: change the check with the row", r[0], r[2], c.leafGo)
		}
		seen[r[0]] = true
	}
	for _, c := range compatRows {
		if !seen[c.where] {
			t.Errorf("compatRows: check %q has no row in compatibility.md", c.where)
		}
	}
}

// TestCompatibilityTable checks the leaf-go answer of every row of
// compatibility.md's table against real servers.
func TestCompatibilityTable(t *testing.T) {
	servertest.SkipShort(t)
	// The same build as TestTranscripts' (its leaftest hooks stay off
	// without their variables), so that Go's build cache serves it.
	bin, err := servertest.BuildTags(t.TempDir(), servertest.Race, "leaftest")
	if err != nil {
		t.Fatal(err)
	}
	e := &compatEnv{bin: bin, dir: t.TempDir()}
	e.main = servertest.Start(t, bin, servertest.Options{Dir: e.dir, Env: []string{"LEAF_ADMIN_TOKEN=" + docToken}})
	e.off = servertest.Start(t, bin, servertest.Options{Dir: t.TempDir(),
		Args: []string{"--segment=false", "--time-bits", "40", "--worker-bits", "11", "--sequence-bits", "12"}})
	e.main.WaitReady(t, 20*time.Second)
	e.off.WaitReady(t, 20*time.Second)
	// One segment of the sample tag, so that /db and /cache show numbers
	// past 1,000: max 2,001, step 2,000.
	if got := e.get(t, e.main, "/api/segment/get/leaf-segment-test", nil); got.status != 200 || got.body != "1" {
		t.Fatalf("first ID: %d %q", got.status, got.body)
	}
	for _, r := range compatTable(t) {
		for _, c := range compatRows {
			if c.where == r[0] {
				t.Run(r[0], func(t *testing.T) { c.check(t, e) })
			}
		}
	}
}

// answer is one HTTP response as the checks read it.
type answer struct {
	status int
	header http.Header
	body   string
	raw    string // status line and headers as sent (raw requests only)
}

// get sends a GET with headers (name, value pairs) to p.
func (e *compatEnv) get(t *testing.T, p *servertest.Proc, path string, headers []string) answer {
	t.Helper()
	return e.do(t, p, http.MethodGet, path, headers, "")
}

// do sends one request with Go's client (no compression, so the body and
// its headers are as sent).
func (e *compatEnv) do(t *testing.T, p *servertest.Proc, method, path string, headers []string, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, p.URL(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// rawConn is one client connection that sends request lines as written.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, p *servertest.Proc) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// send writes "<method> <target> HTTP/1.1" with Host and extra header lines
// and reads the answer.
func (rc *rawConn) send(t *testing.T, method, target string, extra ...string) answer {
	t.Helper()
	msg := method + " " + target + " HTTP/1.1\r\nHost: leaf\r\n"
	for _, h := range extra {
		msg += h + "\r\n"
	}
	if _, err := io.WriteString(rc.c, msg+"\r\n"); err != nil {
		t.Fatal(err)
	}
	var head bytes.Buffer
	for {
		l, err := rc.br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s %s: %v after %q", method, target, err, head.String())
		}
		head.WriteString(l)
		if l == "\r\n" {
			break
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(bytes.NewReader(head.Bytes()), rc.br)), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b), raw: head.String()}
}

// raw sends one request on a connection of its own.
func (e *compatEnv) raw(t *testing.T, p *servertest.Proc, method, target string, extra ...string) answer {
	t.Helper()
	return dialRaw(t, p).send(t, method, target, extra...)
}

// admin calls the admin API of e.main.
func (e *compatEnv) admin(t *testing.T, method, path, body string) answer {
	t.Helper()
	return e.do(t, e.main, method, "/api/v1/admin"+path, []string{"Authorization", "Bearer " + docToken}, body)
}

// createTag creates tag on e.main, or finds it there.
func (e *compatEnv) createTag(t *testing.T, tag string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"bizTag": tag, "step": 1000})
	if err != nil {
		t.Fatal(err)
	}
	if a := e.admin(t, http.MethodPost, "/tags", string(body)); a.status != 201 && a.status != 409 {
		t.Fatalf("create %q: %d %s", tag, a.status, a.body)
	}
}

var leafBodyRe = regexp.MustCompile(`^\{"timestamp":\d+,"status":(\d+),"error":"[^"]+",("exception":"[^"]+",)?"message":".*","path":".*"\}$`)

// springShape fails t unless a is Spring's JSON error with status want.
func springShape(t *testing.T, what string, a answer, want int) {
	t.Helper()
	m := leafBodyRe.FindStringSubmatch(a.body)
	if a.status != want || m == nil || m[1] != fmt.Sprint(want) || a.header.Get("Content-Type") != "application/json;charset=UTF-8" {
		t.Errorf("%s: %d %s %q, want %d in Spring's JSON error shape", what, a.status, a.header.Get("Content-Type"), a.body, want)
	}
}

var (
	dbRowRe    = regexp.MustCompile(`(?s)<tr>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*</tr>`)
	cacheRowRe = regexp.MustCompile(`(?s)<tr>\s*<td>([^<]*)</td>\s*<td>(?:true|false)</td>`)
)

// javaBucket is the bucket of s in a Java HashMap or ConcurrentHashMap of
// 16 buckets: String.hashCode over UTF-16 code units, spread h ^ (h >>> 16),
// the low 4 bits.
func javaBucket(s string) uint32 {
	var h uint32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + uint32(u)
	}
	return (h ^ h>>16) & 15
}

var compatRows = []compatRow{
	{
		where:  "`{key}` with a dot and a known extension (`leaf-segment-test.json`, `.xml`, `.html`, `.b`)",
		leafGo: "the whole key is the tag (here unknown: 500, -2)",
		check: func(t *testing.T, e *compatEnv) {
			for _, ext := range []string{".json", ".xml", ".html", ".b"} {
				a := e.get(t, e.main, "/api/segment/get/leaf-segment-test"+ext, nil)
				springShape(t, ext, a, 500)
				if !strings.Contains(a.body, "Result{id=-2, status=EXCEPTION}") || a.header.Get("Content-Disposition") != "" {
					t.Errorf("%s: %q (Content-Disposition %q), want -2 and no Content-Disposition", ext, a.body, a.header.Get("Content-Disposition"))
				}
			}
		},
	},
	{
		where:  "methods Spring does not know (`BREW`) on the ID routes, `/decodeSnowflakeId`, `/cache`, `/db`",
		leafGo: "405 with `Allow` (on the ID routes and `/decodeSnowflakeId`, `QUERY` and `CONNECT`, which the router knows, are served as in Leaf)",
		check: func(t *testing.T, e *compatEnv) {
			paths := []string{"/api/segment/get/leaf-segment-test", "/api/snowflake/get/k", "/decodeSnowflakeId?snowflakeId=1", "/cache", "/db"}
			for _, p := range paths {
				if a := e.raw(t, e.main, "BREW", p); a.status != 405 || a.header.Get("Allow") == "" {
					t.Errorf("BREW %s: %d, Allow %q; want 405 with Allow", p, a.status, a.header.Get("Allow"))
				}
			}
			for _, m := range []string{"QUERY", "CONNECT"} {
				for _, p := range paths[:3] {
					if a := e.raw(t, e.main, m, p); a.status != 200 || a.body == "" {
						t.Errorf("%s %s: %d %q, want 200 and the answer", m, p, a.status, a.body)
					}
				}
			}
		},
	},
	{
		where:  "TRACE",
		leafGo: "405, `Allow` with the methods the route serves, Spring's JSON error shape",
		check: func(t *testing.T, e *compatEnv) {
			for p, allow := range map[string]string{
				"/api/segment/get/leaf-segment-test": "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
				"/cache":                             "GET, HEAD, POST, OPTIONS",
			} {
				a := e.raw(t, e.main, "TRACE", p, "X-Echo: secret")
				springShape(t, "TRACE "+p, a, 405)
				if a.header.Get("Allow") != allow || strings.Contains(a.body, "secret") {
					t.Errorf("TRACE %s: Allow %q, body %q; want Allow %q and no echo", p, a.header.Get("Allow"), a.body, allow)
				}
			}
		},
	},
	{
		where:  "`/cache`, `/db` with PUT, PATCH, DELETE",
		leafGo: "405; OPTIONS lists `GET,HEAD,POST,OPTIONS`",
		check: func(t *testing.T, e *compatEnv) {
			for _, p := range []string{"/cache", "/db"} {
				for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodDelete} {
					if a := e.do(t, e.main, m, p, nil, ""); a.status != 405 {
						t.Errorf("%s %s: %d, want 405", m, p, a.status)
					}
				}
				if a := e.do(t, e.main, http.MethodOptions, p, nil, ""); a.status != 200 || a.header.Get("Allow") != "GET,HEAD,POST,OPTIONS" {
					t.Errorf("OPTIONS %s: %d, Allow %q; want 200, GET,HEAD,POST,OPTIONS", p, a.status, a.header.Get("Allow"))
				}
			}
		},
	},
	{
		where:  "`/cache`, `/db` with segment mode off",
		leafGo: "503 with how to enable it",
		check: func(t *testing.T, e *compatEnv) {
			for _, p := range []string{"/cache", "/db"} {
				if a := e.get(t, e.off, p, nil); a.status != 503 || !strings.Contains(a.body, "--segment") {
					t.Errorf("%s with --segment=false: %d %q, want 503 naming --segment", p, a.status, a.body)
				}
			}
		},
	},
	{
		where:  "`/db` when `leaf_alloc` cannot be read",
		leafGo: "503 and a short page pointing to the log",
		check: func(t *testing.T, e *compatEnv) {
			dir := t.TempDir()
			p := servertest.Start(t, e.bin, servertest.Options{Dir: dir})
			p.WaitReady(t, 20*time.Second)
			db, err := sql.Open("sqlite", filepath.Join(dir, "data", "leaf.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("ALTER TABLE leaf_alloc RENAME TO leaf_alloc_away"); err != nil {
				t.Fatal(err)
			}
			a := e.get(t, p, "/db", nil)
			if a.status != 503 || !strings.Contains(a.body, "log") || len(a.body) > 2048 {
				t.Errorf("/db without leaf_alloc: %d %q, want 503 and a short page pointing to the log", a.status, a.body)
			}
		},
	},
	{
		where:  "`/cache`, `/db` numbers",
		leafGo: "always English grouping (`2,001`), `Content-Language: en`",
		check: func(t *testing.T, e *compatEnv) {
			for _, p := range []string{"/cache", "/db"} {
				a := e.get(t, e.main, p, []string{"Accept-Language", "de-DE,de;q=0.9"})
				if a.status != 200 || !strings.Contains(a.body, "<td>2,001</td>") || a.header.Get("Content-Language") != "en" {
					t.Errorf("%s with Accept-Language de-DE: %d, Content-Language %q, want 2,001 and en:\n%s", p, a.status, a.header.Get("Content-Language"), a.body)
				}
			}
		},
	},
	{
		where:  "`/db` `update`",
		leafGo: "UTC, as the store reads it, with the fraction the store keeps (`.0` on MySQL's `timestamp`, milliseconds on SQLite, microseconds on PostgreSQL), printed as Java's `Timestamp.toString`",
		check: func(t *testing.T, e *compatEnv) {
			stores := []struct {
				name     string
				dsn      func(testing.TB) string // nil: e.main's SQLite file
				fraction *regexp.Regexp          // Timestamp.toString drops trailing zeros, keeps at least one digit
			}{
				{"SQLite", nil, regexp.MustCompile(`^\.\d{1,3}$`)},
				{"PostgreSQL", dbtest.Postgres, regexp.MustCompile(`^\.\d{1,6}$`)},
				{"MySQL", dbtest.MySQL, regexp.MustCompile(`^\.0$`)},
			}
			for _, s := range stores {
				p := e.main
				if s.dsn != nil {
					p = servertest.Start(t, e.bin, servertest.Options{Dir: t.TempDir(), Args: []string{"--segment-dsn", s.dsn(t)},
						Env: []string{"LEAF_ADMIN_TOKEN=" + docToken}})
					p.WaitReady(t, 20*time.Second)
				}
				var list struct {
					Tags []struct{ BizTag, UpdateTime string }
				}
				a := e.do(t, p, http.MethodGet, "/api/v1/admin/tags", []string{"Authorization", "Bearer " + docToken}, "")
				if err := json.Unmarshal([]byte(a.body), &list); err != nil || len(list.Tags) == 0 {
					t.Fatalf("%s: tag list %d %q: %v", s.name, a.status, a.body, err)
				}
				want := map[string]string{}
				for _, tag := range list.Tags {
					ut, err := time.Parse(time.RFC3339, tag.UpdateTime)
					if err != nil {
						t.Fatal(err)
					}
					want[tag.BizTag] = ut.UTC().Format("2006-01-02 15:04:05")
				}
				rows := dbRowRe.FindAllStringSubmatch(e.get(t, p, "/db", nil).body, -1)
				if len(rows) == 0 {
					t.Fatalf("%s: no rows on /db", s.name)
				}
				for _, r := range rows {
					whole, frac := r[4][:min(19, len(r[4]))], r[4][min(19, len(r[4])):]
					if whole != want[r[1]] || !s.fraction.MatchString(frac) {
						t.Errorf("%s /db: %q update %q, want %s UTC (the admin API's updateTime) and a fraction matching %s", s.name, r[1], r[4], want[r[1]], s.fraction)
					}
				}
			}
		},
	},
	{
		where:  "`/db` row order",
		leafGo: "`biz_tag` in byte order",
		check: func(t *testing.T, e *compatEnv) {
			for _, tag := range []string{"b-tag", "B-tag", "a-tag"} {
				e.createTag(t, tag)
			}
			var names []string
			for _, r := range dbRowRe.FindAllStringSubmatch(e.get(t, e.main, "/db", nil).body, -1) {
				names = append(names, r[1])
			}
			if !slices.IsSorted(names) || !slices.Contains(names, "B-tag") || !slices.Contains(names, "a-tag") {
				t.Errorf("/db rows %q, want every tag in byte order", names)
			}
		},
	},
	{
		where:  "`/cache` row order",
		leafGo: "the same, modelled (`api/javamap.go`); two tags in one bin of a resized `ConcurrentHashMap` may swap",
		check: func(t *testing.T, e *compatEnv) {
			for _, tag := range []string{"order", "user", "pay", "coupon"} {
				e.createTag(t, tag)
			}
			var names []string
			for _, r := range cacheRowRe.FindAllStringSubmatch(e.get(t, e.main, "/cache", nil).body, -1) {
				names = append(names, r[1])
			}
			if len(names) < 5 || len(names) >= 12 {
				t.Fatalf("/cache rows %q: this check models maps of 16 buckets (fewer than 12 tags)", names)
			}
			// Java fills the maps in the table's order (byte order here)
			// and walks them bucket by bucket.
			want := slices.Sorted(slices.Values(names))
			slices.SortStableFunc(want, func(a, b string) int { return int(javaBucket(a)) - int(javaBucket(b)) })
			if !slices.Equal(names, want) {
				t.Errorf("/cache rows %q, want Java's map order %q", names, want)
			}
		},
	},
	{
		where:  "`/cache`, `/db` tags with `<>&\"'`",
		leafGo: "HTML-escaped (`&lt;`, `&#39;`)",
		check: func(t *testing.T, e *compatEnv) {
			e.createTag(t, `x<b>&"'`)
			for _, p := range []string{"/cache", "/db"} {
				body := e.get(t, e.main, p, nil).body
				if strings.Contains(body, "x<b>") || !strings.Contains(body, "x&lt;b&gt;&amp;&quot;&#39;") {
					t.Errorf("%s: tag x<b>&\"' not HTML-escaped:\n%s", p, body)
				}
			}
		},
	},
	{
		where:  "Leaf pages' headers",
		leafGo: "`Content-Security-Policy`, `X-Content-Type-Options`, `Referrer-Policy`, `Cache-Control: no-store`",
		check: func(t *testing.T, e *compatEnv) {
			for _, p := range []string{"/cache", "/db"} {
				h := e.get(t, e.main, p, nil).header
				if h.Get("Content-Security-Policy") == "" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") == "" || h.Get("Cache-Control") != "no-store" {
					t.Errorf("%s headers %v, want Content-Security-Policy, X-Content-Type-Options: nosniff, Referrer-Policy, Cache-Control: no-store", p, h)
				}
			}
		},
	},
	{
		where:  "`/fonts/glyphicons-halflings-regular.woff2`",
		leafGo: "served",
		check: func(t *testing.T, e *compatEnv) {
			if a := e.get(t, e.main, "/fonts/glyphicons-halflings-regular.woff2", nil); a.status != 200 || !strings.HasPrefix(a.body, "wOF2") {
				t.Errorf("glyphicons woff2: %d, %d bytes, want 200 and a WOFF2 file", a.status, len(a.body))
			}
		},
	},
	{
		where:  "`/favicon.ico`",
		leafGo: "404",
		check: func(t *testing.T, e *compatEnv) {
			if a := e.get(t, e.main, "/favicon.ico", nil); a.status != 404 {
				t.Errorf("/favicon.ico: %d, want 404", a.status)
			}
		},
	},
	{
		where:  "success and error bodies of JSON, decode and pages",
		leafGo: "`Content-Length`",
		check: func(t *testing.T, e *compatEnv) {
			for _, p := range []string{"/api/segment/get/leaf-segment-test", "/api/segment/get/no-such-tag",
				"/api/v1/segment/leaf-segment-test?count=3", "/api/v1/segment/no-such-tag",
				"/decodeSnowflakeId?snowflakeId=1", "/cache", "/db"} {
				a := e.raw(t, e.main, http.MethodGet, p)
				if !strings.Contains(a.raw, "\r\nContent-Length: ") || strings.Contains(a.raw, "Transfer-Encoding") {
					t.Errorf("GET %s: headers %q, want Content-Length and no Transfer-Encoding", p, a.raw)
				}
			}
		},
	},
	{
		where:  "keep-alive after a 500",
		leafGo: "the connection stays open",
		check: func(t *testing.T, e *compatEnv) {
			rc := dialRaw(t, e.main)
			if a := rc.send(t, http.MethodGet, "/api/segment/get/no-such-tag"); a.status != 500 || a.header.Get("Connection") != "" {
				t.Fatalf("unknown tag: %d, Connection %q; want 500 without Connection: close", a.status, a.header.Get("Connection"))
			}
			if a := rc.send(t, http.MethodGet, "/api/segment/get/leaf-segment-test"); a.status != 200 {
				t.Errorf("second request on the connection: %d, want 200", a.status)
			}
		},
	},
	{
		where:  "status line",
		leafGo: "`HTTP/1.1 200 OK`",
		check: func(t *testing.T, e *compatEnv) {
			if a := e.raw(t, e.main, http.MethodGet, "/api/segment/get/leaf-segment-test"); !strings.HasPrefix(a.raw, "HTTP/1.1 200 OK\r\n") {
				t.Errorf("status line of %q, want HTTP/1.1 200 OK", a.raw)
			}
		},
	},
	{
		where:  "`Accept` that is malformed, or names no concrete type Spring can write (`image/*`)",
		leafGo: "`text/plain;charset=UTF-8` and the ID",
		check: func(t *testing.T, e *compatEnv) {
			for _, accept := range []string{"image/*", "text/", "application/json;q=x", "*"} {
				a := e.get(t, e.main, "/api/segment/get/leaf-segment-test", []string{"Accept", accept})
				if a.status != 200 || a.header.Get("Content-Type") != "text/plain;charset=UTF-8" || !regexp.MustCompile(`^\d+$`).MatchString(a.body) {
					t.Errorf("Accept %q: %d %s %q, want 200 text/plain;charset=UTF-8 and the ID", accept, a.status, a.header.Get("Content-Type"), a.body)
				}
			}
		},
	},
	{
		where:  "`Accept` range parameters (`text/plain;charset=UTF-16`)",
		leafGo: "dropped: the body is always UTF-8 and says so",
		check: func(t *testing.T, e *compatEnv) {
			a := e.get(t, e.main, "/api/segment/get/leaf-segment-test", []string{"Accept", "text/plain;charset=UTF-16"})
			if a.status != 200 || a.header.Get("Content-Type") != "text/plain;charset=UTF-8" || !regexp.MustCompile(`^\d+$`).MatchString(a.body) {
				t.Errorf("Accept text/plain;charset=UTF-16: %d %s %q, want text/plain;charset=UTF-8 and ASCII digits", a.status, a.header.Get("Content-Type"), a.body)
			}
		},
	},
	{
		where:  "`Accept` with 32 or more ranges",
		leafGo: "a stable sort",
		check: func(t *testing.T, e *compatEnv) {
			// 40 ranges of one quality and specificity: a stable sort keeps
			// the first, application/json.
			ranges := []string{"application/json"}
			for i := 1; i < 40; i++ {
				ranges = append(ranges, []string{"text/plain", "text/html"}[i%2])
			}
			a := e.get(t, e.main, "/api/segment/get/leaf-segment-test", []string{"Accept", strings.Join(ranges, ", ")})
			if a.status != 200 || a.header.Get("Content-Type") != "application/json;charset=UTF-8" {
				t.Errorf("40 ranges, application/json first: %d %s, want application/json;charset=UTF-8", a.status, a.header.Get("Content-Type"))
			}
		},
	},
	{
		where:  "invalid key (control character, over 128 characters, broken UTF-8)",
		leafGo: "400 in Spring's error shape",
		check: func(t *testing.T, e *compatEnv) {
			for _, key := range []string{"a%01b", strings.Repeat("k", 129), "a%FFb"} {
				springShape(t, "key "+key, e.get(t, e.main, "/api/segment/get/"+key, nil), 400)
			}
		},
	},
	{
		where:  "`%2F` in a path",
		leafGo: "part of the key",
		check: func(t *testing.T, e *compatEnv) {
			e.createTag(t, "a/b")
			if a := e.raw(t, e.main, http.MethodGet, "/api/segment/get/a%2Fb"); a.status != 200 || a.body != "1" {
				t.Errorf("GET /api/segment/get/a%%2Fb: %d %q, want tag a/b's first ID 1", a.status, a.body)
			}
		},
	},
	{
		where:  "dot segments (`/./`, `/../`)",
		leafGo: "not resolved (404)",
		check: func(t *testing.T, e *compatEnv) {
			for _, p := range []string{"/api/segment/./get/leaf-segment-test", "/api/segment/../segment/get/leaf-segment-test"} {
				if a := e.raw(t, e.main, http.MethodGet, p); a.status != 404 {
					t.Errorf("GET %s: %d, want 404", p, a.status)
				}
			}
		},
	},
	{
		where:  "path parameters in `/api/v1/…`",
		leafGo: "kept",
		check: func(t *testing.T, e *compatEnv) {
			a := e.raw(t, e.main, http.MethodGet, "/api/v1/segment/leaf-segment-test;jsessionid=1?count=1")
			if a.status != 404 || !strings.Contains(a.body, `\"leaf-segment-test;jsessionid=1\"`) {
				t.Errorf("path parameter on the batch route: %d %q, want 404 for the tag leaf-segment-test;jsessionid=1", a.status, a.body)
			}
		},
	},
	{
		where:  "`/decodeSnowflakeId` with an `Accept` that admits no JSON (`text/html`, `text/plain`, `application/xml` alone)",
		leafGo: "200 and the JSON",
		check: func(t *testing.T, e *compatEnv) {
			for _, accept := range []string{"text/html", "text/plain", "application/xml"} {
				a := e.get(t, e.main, "/decodeSnowflakeId?snowflakeId=1724551110457221119", []string{"Accept", accept})
				if a.status != 200 || a.header.Get("Content-Type") != "application/json;charset=UTF-8" || !strings.Contains(a.body, `"workerId":"237"`) {
					t.Errorf("Accept %s: %d %s %q, want 200 and the JSON", accept, a.status, a.header.Get("Content-Type"), a.body)
				}
			}
		},
	},
	{
		where:  "`/decodeSnowflakeId` digits",
		leafGo: "ASCII digits only; others get `errorMsg`",
		check: func(t *testing.T, e *compatEnv) {
			// ١ (ARABIC-INDIC DIGIT ONE), which Long.parseLong reads as 1
			a := e.get(t, e.main, "/decodeSnowflakeId?snowflakeId="+url.QueryEscape("١"), nil)
			if a.status != 200 || !strings.HasPrefix(a.body, `{"errorMsg":`) {
				t.Errorf("an Arabic-Indic digit: %d %q, want 200 and errorMsg", a.status, a.body)
			}
		},
	},
	{
		where:  "`/decodeSnowflakeId` layout",
		leafGo: "the server's layout (`--epoch-ms` and the bit widths)",
		check: func(t *testing.T, e *compatEnv) {
			l := snowflake.DefaultLayout()
			l.TimeBits, l.WorkerBits = 40, 11
			ms := int64(1700000000000)
			id, err := l.Compose(ms, 1500, 7)
			if err != nil {
				t.Fatal(err)
			}
			a := e.get(t, e.off, fmt.Sprintf("/decodeSnowflakeId?snowflakeId=%d", id), nil)
			want := `{"workerId":"1500","sequenceId":"7","timestamp":"1700000000000(`
			if a.status != 200 || !strings.HasPrefix(a.body, want) {
				t.Errorf("decode %d on a 40/11/12 server: %d %q, want %s…", id, a.status, a.body, want)
			}
		},
	},
	{
		where:  "`/decodeSnowflakeId` form body",
		leafGo: "64 KiB",
		check: func(t *testing.T, e *compatEnv) {
			form := []string{"Content-Type", "application/x-www-form-urlencoded"}
			pad := func(n int) string { return "snowflakeId=1&pad=" + strings.Repeat("a", n-len("snowflakeId=1&pad=")) }
			if a := e.do(t, e.main, http.MethodPost, "/decodeSnowflakeId", form, pad(64<<10)); a.status != 200 || !strings.Contains(a.body, `"sequenceId":"1"`) {
				t.Errorf("a form of 64 KiB: %d %q, want it decoded", a.status, a.body)
			}
			if a := e.do(t, e.main, http.MethodPost, "/decodeSnowflakeId", form, pad(64<<10+1)); a.status != 400 {
				t.Errorf("a form of 64 KiB + 1: %d %q, want 400 (not read)", a.status, a.body)
			}
		},
	},
}
