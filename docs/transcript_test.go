package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
)

// A transcript is a shell session shown in a code block of README.md or
// docs/*.md: a line `$ <command>` followed by the lines the command prints,
// up to the next `$ ` line or the end of the block. Every transcript of one
// file runs, in order, against one fresh leaf-server (its own data dir, the
// embedded SQLite store, --admin-token $TOKEN, TZ=UTC) on a loopback port.
// Commands are:
//
//   - `curl` (the options curlCommand knows), sent as curl sends it;
//   - `leafctl` (the binary built from ./cmd/leafctl, run in the server's
//     working directory, so its default --dsn is the server's SQLite file);
//   - `leaf-server` (the binary under test, run in a fresh directory of its
//     own): only a start that ends by itself, such as a refused setting,
//     whose message is the answer.
//
// `localhost:8080` and `127.0.0.1:8080` in a command stand for the server's
// real address. A leafctl or leaf-server command may start with
// environment assignments (`LEAF_SEGMENT_DNS=x leaf-server`).
//
// A file may fix the server's clock for its sessions with a line
//
//	<!-- transcript: clock=2026-12-01T17:52:00Z -->
//
// (the server is built with -tags leaftest and started with that offset
// from the real clock; it runs on from there), and may start a new server,
// on a fresh data dir and with the flags given, for the transcripts that
// follow, with a line
//
//	<!-- transcript: server --worker-id 5 --snowflake=false -->
//
// Answers are compared line by line after normalize, which only replaces what
// legitimately differs from run to run; everything else must be as shown.

// docToken is the admin token of every transcript server: $TOKEN in commands.
const docToken = "s3cret"

// docFiles are the documents whose transcripts run: README.md and every
// Markdown file in this folder.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, files...)
}

type step struct {
	line int    // 1-based line of the command in its file
	cmd  string // the text after "$ "
	want []string
}

// A run is the transcripts that share one server.
type run struct {
	line  int      // 1-based line of its server directive; 0 for the first, default server
	args  []string // the server's flags beyond the defaults
	steps []step
}

type transcriptDoc struct {
	path  string
	clock time.Time // zero: the real clock
	runs  []run
}

// steps returns every step of d, in order.
func (d transcriptDoc) steps() []step {
	var all []step
	for _, r := range d.runs {
		all = append(all, r.steps...)
	}
	return all
}

var (
	clockDirective  = regexp.MustCompile(`^<!-- transcript: clock=(\S+) -->$`)
	serverDirective = regexp.MustCompile(`^<!-- transcript: server( .*)? -->$`)
	fenceRe         = regexp.MustCompile("^\\s*```")
)

// parseTranscripts reads the transcripts of one Markdown file: code blocks
// (fenced, or indented by 4 or more spaces) whose first line starts with "$ ".
func parseTranscripts(path, text string) (transcriptDoc, error) {
	d := transcriptDoc{path: path, runs: []run{{}}}
	lines := strings.Split(text, "\n")
	inFence := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := clockDirective.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			c, err := time.Parse(time.RFC3339, m[1])
			if err != nil {
				return d, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
			d.clock = c
			continue
		}
		if m := serverDirective.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			args, err := shellWords(m[1])
			if err != nil {
				return d, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
			if last := d.runs[len(d.runs)-1]; last.line != 0 && len(last.steps) == 0 {
				return d, fmt.Errorf("%s:%d: server directive without a transcript after it", path, last.line)
			}
			d.runs = append(d.runs, run{line: i + 1, args: args})
			continue
		}
		if fenceRe.MatchString(l) {
			inFence = !inFence
			continue
		}
		body := strings.TrimLeft(l, " ")
		indent := len(l) - len(body)
		if !strings.HasPrefix(body, "$ ") || (!inFence && indent < 4) {
			continue
		}
		// A transcript block: this line and the following lines of the
		// same block (inside the fence, or indented at least as much).
		r := &d.runs[len(d.runs)-1]
		var cur *step
		for ; i < len(lines); i++ {
			l = lines[i]
			if inFence && fenceRe.MatchString(l) {
				i-- // the outer loop toggles the fence
				break
			}
			if !inFence && (strings.TrimSpace(l) == "" || len(l)-len(strings.TrimLeft(l, " ")) < indent) {
				break
			}
			if len(l) >= indent {
				l = l[indent:]
			}
			if c, ok := strings.CutPrefix(l, "$ "); ok {
				r.steps = append(r.steps, step{line: i + 1, cmd: c})
				cur = &r.steps[len(r.steps)-1]
				continue
			}
			cur.want = append(cur.want, l)
		}
	}
	if last := d.runs[len(d.runs)-1]; last.line != 0 && len(last.steps) == 0 {
		return d, fmt.Errorf("%s:%d: server directive without a transcript after it", path, last.line)
	}
	if len(d.runs[0].steps) == 0 {
		d.runs = d.runs[1:] // the default server has nothing to run
	}
	return d, nil
}

func readTranscripts(t *testing.T) []transcriptDoc {
	t.Helper()
	var docs []transcriptDoc
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := parseTranscripts(f, string(b))
		if err != nil {
			t.Fatal(err)
		}
		if len(d.runs) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// TestTranscriptsParse runs in -short mode too: every transcript command is
// one the runner can execute, and README.md has its curl session.
func TestTranscriptsParse(t *testing.T) {
	docs := readTranscripts(t)
	if len(docs) == 0 || docs[0].path != "../README.md" {
		t.Fatal("README.md has no transcript; its curl session must run")
	}
	for _, d := range docs {
		for _, s := range d.steps() {
			if _, err := prepare(s.cmd, "127.0.0.1:1"); err != nil {
				t.Errorf("%s:%d: %v", d.path, s.line, err)
			}
		}
	}
}

// binaries are the programs transcripts run.
type binaries struct {
	server  string // leaf-server, built with -tags leaftest
	leafctl string
}

// TestTranscripts runs every transcript against a real leaf-server.
func TestTranscripts(t *testing.T) {
	servertest.SkipShort(t)
	docs := readTranscripts(t)
	dir := t.TempDir()
	server, err := servertest.BuildTags(dir, servertest.Race, "leaftest")
	if err != nil {
		t.Fatal(err)
	}
	bins := binaries{server: server, leafctl: filepath.Join(dir, "leafctl")}
	if out, err := exec.Command("go", "build", "-o", bins.leafctl, "github.com/leaf-go/leaf/cmd/leafctl").CombinedOutput(); err != nil {
		t.Fatalf("build leafctl: %v\n%s", err, out)
	}
	for _, d := range docs {
		t.Run(strings.TrimPrefix(d.path, "../"), func(t *testing.T) {
			for _, r := range d.runs {
				runTranscript(t, d, r, bins)
			}
		})
	}
}

// runTranscript runs the steps of r against a fresh server started with
// r's flags.
func runTranscript(t *testing.T, d transcriptDoc, r run, bins binaries) {
	dir := t.TempDir()
	env := []string{"LEAF_ADMIN_TOKEN=" + docToken, "TZ=UTC"}
	if !d.clock.IsZero() {
		clockFile := filepath.Join(dir, "clock-offset")
		offset := time.Until(d.clock).Milliseconds()
		if err := os.WriteFile(clockFile, []byte(strconv.FormatInt(offset, 10)), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "LEAF_TEST_CLOCK_FILE="+clockFile)
	}
	p := servertest.Start(t, bins.server, servertest.Options{Dir: dir, Args: r.args, Env: env})
	p.WaitReady(t, 20*time.Second)
	for _, s := range r.steps {
		c, err := prepare(s.cmd, p.Addr())
		if err != nil {
			t.Fatalf("%s:%d: %v", d.path, s.line, err)
		}
		got, err := c.run(t.Context(), dir, bins)
		if err != nil {
			t.Fatalf("%s:%d: $ %s: %v", d.path, s.line, s.cmd, err)
		}
		got = strings.ReplaceAll(got, p.Addr(), "127.0.0.1:8080")
		gotLines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if got == "" {
			gotLines = nil
		}
		if g, w := normalize(gotLines), normalize(s.want); g != w {
			t.Errorf("%s:%d: $ %s\ngot:\n%s\nwant (as documented):\n%s", d.path, s.line, s.cmd, g, w)
		}
	}
}

// normalizers replace what differs from run to run and nothing else.
var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	// The time of a Leaf-style error body (Spring's "timestamp", Unix ms).
	{regexp.MustCompile(`^\{"timestamp":\d{13},"status":`), `{"timestamp":<ms>,"status":`},
	// leaf_alloc's update_time as the admin API answers it.
	{regexp.MustCompile(`"updateTime":"[^"]*"`), `"updateTime":"…"`},
	// Times of a row or tombstone written by the session, in whole seconds
	// (ID decodes print milliseconds and are left alone).
	{regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b`), `yyyy-mm-ddThh:mm:ssZ`},
	// The time and the OS user of a leafctl audit line (slog text).
	{regexp.MustCompile(`^time=\S+ (level=.* msg="audit: .*) user=\S+ `), `time=… $1 user=… `},
	// leaf_alloc's update_time as leafctl tag list prints it (same width).
	{regexp.MustCompile(`\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`), `yyyy-mm-dd hh:mm:ss UTC`},
	// The time high-water mark of /api/v1/snowflake/status, stored ahead
	// of the clock (empty until the first store is done), and how often it
	// was stored (every second or so, also while idle).
	{regexp.MustCompile(`"highWater":"(\d{4}-\d\d-\d\dT[^"]*)?"`), `"highWater":"…"`},
	{regexp.MustCompile(`"highWaterStores":\d+`), `"highWaterStores":…`},
	// The Date header of curl -i.
	{regexp.MustCompile(`^Date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$`), `Date: …`},
}

func normalize(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		for _, n := range normalizers {
			l = n.re.ReplaceAllString(l, n.with)
		}
		b.WriteString(strings.TrimRight(l, " ") + "\n")
	}
	return b.String()
}

// command is one prepared transcript command.
type command struct {
	prog string   // "curl", "leafctl" or "leaf-server"
	args []string // leafctl's or leaf-server's arguments
	env  []string // leafctl's or leaf-server's NAME=value assignments
	// curl's request
	method  string
	url     string
	headers [][2]string
	body    *string
	include bool // -i: print the status line and the headers first
}

// envAssign is a shell assignment before a command.
var envAssign = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// prepare splits line as a POSIX shell would for the few forms transcripts
// use, expands $TOKEN, points the documented address at addr and checks the
// program and its options.
func prepare(line, addr string) (command, error) {
	words, err := shellWords(line)
	if err != nil {
		return command{}, err
	}
	for i, w := range words {
		w = strings.ReplaceAll(w, "localhost:8080", addr)
		words[i] = strings.ReplaceAll(w, "127.0.0.1:8080", addr)
	}
	var env []string
	for len(words) > 0 && envAssign.MatchString(words[0]) {
		env, words = append(env, words[0]), words[1:]
	}
	if len(words) == 0 {
		return command{}, errors.New("empty command")
	}
	switch words[0] {
	case "leafctl", "bin/leafctl":
		return command{prog: "leafctl", args: words[1:], env: env}, nil
	case "leaf-server", "bin/leaf-server":
		return command{prog: "leaf-server", args: words[1:], env: env}, nil
	case "curl":
		if len(env) > 0 {
			return command{}, fmt.Errorf("curl: environment %v changes nothing", env)
		}
		return curlCommand(words[1:])
	}
	return command{}, fmt.Errorf("transcript command %q: want curl, leafctl or leaf-server", words[0])
}

// curlCommand reads the curl options transcripts use: -s (silent: curl shows
// no progress when its output is not a terminal anyway), -i (include the
// status line and headers), -X method, -H header, -d body (POST,
// Content-Type application/x-www-form-urlencoded unless a -H says otherwise,
// as curl does), and one URL. Single-letter options may be joined (-si).
func curlCommand(args []string) (command, error) {
	c := command{prog: "curl"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("curl %s: missing value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch {
		case a == "-s" || a == "--silent":
		case a == "-i" || a == "--include":
			c.include = true
		case a == "-si" || a == "-is":
			c.include = true
		case a == "-X" || a == "--request":
			c.method, err = next()
		case a == "-H" || a == "--header":
			var h string
			h, err = next()
			name, value, ok := strings.Cut(h, ":")
			if !ok {
				return c, fmt.Errorf("curl -H %q: want Name: value", h)
			}
			c.headers = append(c.headers, [2]string{name, strings.TrimSpace(value)})
		case a == "-d" || a == "--data":
			var b string
			b, err = next()
			c.body = &b
		case strings.HasPrefix(a, "-"):
			return c, fmt.Errorf("curl option %s: the transcript runner does not know it (docs/transcript_test.go)", a)
		case c.url != "":
			return c, fmt.Errorf("curl: two URLs %q and %q", c.url, a)
		default:
			c.url = a
		}
		if err != nil {
			return c, err
		}
	}
	if c.url == "" {
		return c, errors.New("curl: no URL")
	}
	if !strings.Contains(c.url, "://") {
		c.url = "http://" + c.url
	}
	if strings.Contains(c.url, "/./") || strings.Contains(c.url, "/../") {
		return c, fmt.Errorf("curl %s: curl would resolve the dot segments first", c.url)
	}
	if c.method == "" {
		c.method = http.MethodGet
		if c.body != nil {
			c.method = http.MethodPost
		}
	}
	return c, nil
}

// run executes c and returns what a terminal would show: leafctl runs in
// dir, leaf-server in a directory of its own.
func (c command) run(ctx context.Context, dir string, bins binaries) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch c.prog {
	case "leafctl":
		return runProgram(ctx, bins.leafctl, dir, c)
	case "leaf-server":
		own, err := os.MkdirTemp(dir, "leaf-server-")
		if err != nil {
			return "", err
		}
		out, err := runProgram(ctx, bins.server, own, c)
		if ctx.Err() != nil {
			return "", fmt.Errorf("leaf-server did not exit: a transcript shows only a start that ends by itself (a refused setting)\n%s", out)
		}
		return out, err
	}
	return c.curl(ctx)
}

// runProgram runs bin with c's arguments and environment in dir and returns
// its output; an exit status other than 0 is part of the answer, not an
// error.
func runProgram(ctx context.Context, bin, dir string, c command) (string, error) {
	cmd := exec.CommandContext(ctx, bin, c.args...)
	cmd.Dir = dir
	cmd.Env = append(append(servertest.Environ(), "TZ=UTC"), c.env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return string(out), err
	}
	return string(out), nil
}

// curl sends c's request with the headers curl sends, on a connection of
// its own, and returns the body, after the status line and the headers as
// they came (-i).
func (c command) curl(ctx context.Context) (string, error) {
	var body io.Reader
	if c.body != nil {
		body = strings.NewReader(*c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, body)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "curl/8.14.1")
	req.Header.Set("Accept", "*/*")
	if c.body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range c.headers {
		req.Header.Set(h[0], h[1])
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if err := req.Write(conn); err != nil {
		return "", err
	}
	var raw bytes.Buffer
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(conn, &raw)), req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || !c.include {
		return string(b), err
	}
	head, _, ok := bytes.Cut(raw.Bytes(), []byte("\r\n\r\n"))
	if !ok {
		return "", errors.New("curl -i: no end of the header block")
	}
	return strings.ReplaceAll(string(head), "\r\n", "\n") + "\n\n" + string(b), nil
}

// shellWords splits a command line: single quotes are literal, double quotes
// expand $TOKEN and take \" and \\, an unquoted # starts a comment. Any
// other $ expansion, or a shell operator, is an error: transcripts show
// plain commands.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	r := bufio.NewReader(strings.NewReader(line))
	expand := func() error {
		for _, v := range []string{"TOKEN", "{TOKEN}"} {
			if rest, _ := r.Peek(len(v)); string(rest) == v {
				_, _ = r.Discard(len(v))
				cur.WriteString(docToken)
				return nil
			}
		}
		return fmt.Errorf("%q: only $TOKEN is expanded", line)
	}
	for {
		ch, _, err := r.ReadRune()
		if err == io.EOF {
			break
		}
		switch {
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '#' && !inWord:
			return words, nil
		case ch == '\'':
			inWord = true
			for {
				ch, _, err = r.ReadRune()
				if err != nil {
					return nil, fmt.Errorf("%q: unterminated '", line)
				}
				if ch == '\'' {
					break
				}
				cur.WriteRune(ch)
			}
		case ch == '"':
			inWord = true
			for {
				ch, _, err = r.ReadRune()
				if err != nil {
					return nil, fmt.Errorf("%q: unterminated \"", line)
				}
				if ch == '"' {
					break
				}
				if ch == '\\' {
					if n, _ := r.Peek(1); len(n) == 1 && (n[0] == '"' || n[0] == '\\' || n[0] == '$') {
						ch, _, _ = r.ReadRune()
					}
				} else if ch == '$' {
					if err := expand(); err != nil {
						return nil, err
					}
					continue
				}
				cur.WriteRune(ch)
			}
		case ch == '$':
			inWord = true
			if err := expand(); err != nil {
				return nil, err
			}
		case strings.ContainsRune("|&;<>()`\\", ch):
			return nil, fmt.Errorf("%q: %q: transcripts show plain commands", line, ch)
		default:
			inWord = true
			cur.WriteRune(ch)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
