package api_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// springJars are the jars SpringNegotiation.java runs on, from Debian's
// libspring-web-servlet-java and libspring-test-java (Spring 4.3.30, the
// version of the recording) and their dependencies.
var springJars = []string{"spring3-core", "spring3-beans", "spring3-context", "spring3-aop", "spring3-expression",
	"spring3-web", "spring3-web.servlet", "spring3-test", "commons-logging", "jackson-databind", "jackson-core",
	"jackson-annotations", "servlet-api"}

// springAccepts are the Accept headers compared: what clients send, and
// the corners of Spring's comparators (specificity before quality, types of
// different kinds, wildcards, parameters, malformed headers).
var springAccepts = []string{
	"", "*/*", "application/json", "text/html",
	"application/json, application/*+json",                            // RestTemplate.getForObject(url, Long.class), Feign with Jackson
	"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", // browsers
	"image/webp,image/apng,*/*;q=0.8",
	"text/*", "application/*", "application/xml", "TEXT/PLAIN", "text/plain", "*/*;q=0.8",
	"text/plain;charset=ISO-8859-1", "text/html;level=1, text/html, */*;q=0.1",
	"application/json;q=0.1, */*", "application/json;q=0.9, text/*;q=0.1",
	"text/plain;q=0.5, application/json", "application/json;q=0.5, text/plain",
	"text/plain, text/html", "*/*, text/html", "application/json, */*", "text/*, application/json",
	"application/*+json, text/plain;q=0.9", "image/png, */*;q=0.5",
	"application/xml;q=0.9, application/json;q=0.9, text/plain;q=0.9",
	"audio/*, text/plain;q=0.2, application/*;q=0.3", "application/json;q=0, text/plain;q=0",
	"*/*;q=0.5, text/html;q=0.4", "text/*;q=0.9, application/json;q=0.8, */*;q=0.1",
	"application/vnd.api+json, application/*+json;q=0.5", "application/x-www-form-urlencoded",
	"text/html;q=0, */*", "0/0*0",
	// Spring answers 406 to these (after taking the ID); leaf-go text/plain.
	"image/*", "application/*+json", "not a type", "text/plain;q=2", "*/json", "}/0",
}

// TestNegotiationAgainstSpring sends every springAccepts header to leaf-go's
// ID route and to an unknown tag over loopback, and asks Spring MVC 4.3.30
// itself (testdata/spring/SpringNegotiation.java, run with Debian's Spring
// jars) what Leaf's server answers: the ID's Content-Type must be Spring's,
// and the error must be HTML exactly where Spring Boot picks its HTML page.
// The differences docs/compatibility.md lists are allowed: where Spring answers 406 leaf-go
// answers text/plain, and range parameters are not echoed.
func TestNegotiationAgainstSpring(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs Java")
	}
	javac, errC := exec.LookPath("javac")
	java, errJ := exec.LookPath("java")
	var cp []string
	missing := errC != nil || errJ != nil
	for _, j := range springJars {
		p := "/usr/share/java/" + j + ".jar"
		if _, err := os.Stat(p); err != nil {
			missing = true
		}
		cp = append(cp, p)
	}
	if missing {
		const how = "needs javac and Spring 4.3: apt-get install default-jdk-headless libspring-web-servlet-java libspring-test-java"
		if os.Getenv("CI") == "true" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	dir := t.TempDir()
	classpath := strings.Join(cp, ":")
	if out, err := exec.Command(javac, "-nowarn", "-d", dir, "-cp", classpath, "testdata/spring/SpringNegotiation.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	out, err := exec.Command(java, append([]string{"-cp", classpath + ":" + dir, "SpringNegotiation"}, springAccepts...)...).Output()
	if err != nil {
		t.Fatalf("java SpringNegotiation: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(springAccepts) {
		t.Fatalf("Spring answered %d headers, want %d:\n%s", len(lines), len(springAccepts), out)
	}

	s := newOpsServer(t, dbtest.SQLite(t), segment.Config{}, store.Row{BizTag: "leaf-segment-test", MaxID: 1, Step: 2000})
	get := func(path, accept string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", s.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i, accept := range springAccepts {
		f := strings.Split(lines[i], "\t")
		if len(f) != 3 || f[0] != accept {
			t.Fatalf("Spring's line %d = %q, want the header %q and two fields", i, lines[i], accept)
		}
		springType, springPage := f[1], f[2]
		want := springType
		switch {
		case springType == "406":
			want = "text/plain;charset=UTF-8"
		case strings.Count(springType, ";") > 1 || !strings.HasSuffix(springType, ";charset=UTF-8"):
			typ, _, _ := strings.Cut(springType, ";")
			want = typ + ";charset=UTF-8"
		}
		if resp := get("/api/segment/get/leaf-segment-test", accept); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != want {
			t.Errorf("Accept %q: ID = %d %q, want %q (Spring: %s)", accept, resp.StatusCode, resp.Header.Get("Content-Type"), want, springType)
		}
		if springPage != "html" && springPage != "json" {
			t.Errorf("Accept %q: Spring's error mappings tie (%s); leaf-go answers JSON", accept, springPage)
			continue
		}
		resp := get("/api/segment/get/no-such-tag", accept)
		page := "json"
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			page = "html"
		}
		if resp.StatusCode != 500 || page != springPage {
			t.Errorf("Accept %q: unknown tag = %d %s (%s), want 500 and Spring Boot's %s", accept, resp.StatusCode, page,
				resp.Header.Get("Content-Type"), springPage)
		}
	}
	t.Logf("%d Accept headers compared with Spring 4.3.30 (%s)", len(springAccepts), filepath.Base(java))
}
