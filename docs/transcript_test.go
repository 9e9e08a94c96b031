package docs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
// embedded SQLite store, --admin-token $TOKEN, TZ=UTC) on a loopback port. Commands
// are `curl` (the options curlOption knows) and `leafctl` (the binary built
// from ./cmd/leafctl, run in the server's working directory, so its default
// --dsn is the server's SQLite file). `localhost:8080` and `127.0.0.1:8080`
// in a command stand for the server's real address.
//
// A file may fix the server's clock for its sessions with a line
//
//	<!-- transcript: clock=2026-12-01T17:52:00Z -->
//
// (the server is built with -tags leaftest and started with that offset
// from the real clock; it runs on from there).
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

type transcriptDoc struct {
	path  string
	clock time.Time // zero: the real clock
	steps []step
}

var (
	clockDirective = regexp.MustCompile(`^<!-- transcript: clock=(\S+) -->$`)
	fenceRe        = regexp.MustCompile("^\\s*```")
)

// parseTranscripts reads the transcripts of one Markdown file: code blocks
// (fenced, or indented by 4 or more spaces) whose first line starts with "$ ".
func parseTranscripts(path, text string) (transcriptDoc, error) {
	d := transcriptDoc{path: path}
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
				d.steps = append(d.steps, step{line: i + 1, cmd: c})
				cur = &d.steps[len(d.steps)-1]
				continue
			}
			cur.want = append(cur.want, l)
		}
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
		if len(d.steps) > 0 {
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
		for _, s := range d.steps {
			if _, err := prepare(s.cmd, "127.0.0.1:1"); err != nil {
				t.Errorf("%s:%d: %v", d.path, s.line, err)
			}
		}
	}
}

// TestTranscripts runs every transcript against a real leaf-server.
func TestTranscripts(t *testing.T) {
	servertest.SkipShort(t)
	docs := readTranscripts(t)
	bin := t.TempDir()
	server, err := servertest.BuildTags(bin, servertest.Race, "leaftest")
	if err != nil {
		t.Fatal(err)
	}
	leafctl := filepath.Join(bin, "leafctl")
	if out, err := exec.Command("go", "build", "-o", leafctl, "github.com/leaf-go/leaf/cmd/leafctl").CombinedOutput(); err != nil {
		t.Fatalf("build leafctl: %v\n%s", err, out)
	}
	for _, d := range docs {
		t.Run(strings.TrimPrefix(d.path, "../"), func(t *testing.T) {
			runTranscript(t, d, server, leafctl)
		})
	}
}

func runTranscript(t *testing.T, d transcriptDoc, server, leafctl string) {
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
	p := servertest.Start(t, server, servertest.Options{Dir: dir, Env: env})
	p.WaitReady(t, 20*time.Second)
	for _, s := range d.steps {
		c, err := prepare(s.cmd, p.Addr())
		if err != nil {
			t.Fatalf("%s:%d: %v", d.path, s.line, err)
		}
		got, err := c.run(t.Context(), dir, leafctl)
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
	prog string   // "curl" or "leafctl"
	args []string // leafctl's arguments
	// curl's request
	method  string
	url     string
	headers [][2]string
	body    *string
}

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
	if len(words) == 0 {
		return command{}, errors.New("empty command")
	}
	switch words[0] {
	case "leafctl", "bin/leafctl":
		return command{prog: "leafctl", args: words[1:]}, nil
	case "curl":
		return curlCommand(words[1:])
	}
	return command{}, fmt.Errorf("transcript command %q: want curl or leafctl", words[0])
}

// curlCommand reads the curl options transcripts use: -s (silent: curl shows
// no progress when its output is not a terminal anyway), -X method, -H
// header, -d body (POST, Content-Type application/x-www-form-urlencoded
// unless a -H says otherwise, as curl does), and one URL.
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
	if c.method == "" {
		c.method = http.MethodGet
		if c.body != nil {
			c.method = http.MethodPost
		}
	}
	return c, nil
}

// run executes c and returns what a terminal would show.
func (c command) run(ctx context.Context, dir, leafctl string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if c.prog == "leafctl" {
		cmd := exec.CommandContext(ctx, leafctl, c.args...)
		cmd.Dir = dir
		cmd.Env = append(servertest.Environ(), "TZ=UTC")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return "", err
		}
		return string(out), nil
	}
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
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
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
