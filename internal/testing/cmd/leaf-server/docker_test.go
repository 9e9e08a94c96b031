package leafserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/servertest"
)

// TestDockerImageFiles reads the Dockerfile and .dockerignore (no container
// engine runs on these machines, so the image is checked by reading it and
// by running the binary with the image's environment), issue 21 item 5:
//   - the build context leaves out .git, bin/, data/ and testdata/out/;
//   - /data exists in the image owned by the non-root user it runs as;
//   - the image sets no segment DSN, and with its LEAF_LISTEN (0.0.0.0)
//     and nothing else the server refuses to start, saying what to set;
//     with LEAF_SEGMENT_DSN=sqlite:… it starts.
func TestDockerImageFiles(t *testing.T) {
	servertest.SkipShort(t)
	ignore, err := os.ReadFile("../../../../.dockerignore")
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	lines := strings.Split(string(ignore), "\n")
	for _, want := range []string{".git", "bin/", "data/", "testdata/out/"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
	raw, err := os.ReadFile("../../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	chown := regexp.MustCompile(`(?m)^COPY --from=build --chown=65532:65532 \S+ /data$`).FindStringIndex(df)
	volume := strings.Index(df, `VOLUME ["/data"]`)
	if chown == nil || volume < 0 || chown[0] > volume || !strings.Contains(df, "USER nonroot:nonroot") {
		t.Errorf("Dockerfile: want /data copied with --chown=65532:65532 (distroless nonroot) before VOLUME, and USER nonroot")
	}
	m := regexp.MustCompile(`(?m)^ENV (.+)$`).FindStringSubmatch(df)
	if m == nil {
		t.Fatal("Dockerfile sets no ENV")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEAF_") {
			env = append(env, kv)
		}
	}
	dir := t.TempDir()
	for _, kv := range strings.Fields(m[1]) {
		if strings.HasPrefix(kv, "LEAF_SEGMENT_DSN=") {
			t.Errorf("Dockerfile sets %s: the image must make the user choose", kv)
		}
		if strings.HasPrefix(kv, "LEAF_DATA_DIR=") {
			kv = "LEAF_DATA_DIR=" + dir
		}
		env = append(env, kv)
	}
	cmd := exec.Command(serverBin, "--print-config")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no --segment-dsn on a non-loopback address") || !strings.Contains(string(out), "sqlite:<path>") {
		t.Errorf("leaf-server with the image's environment: %v\n%s\nwant a refusal saying to set a DSN", err, out)
	}
	cmd = exec.Command(serverBin, "--print-config")
	cmd.Env = append(env, "LEAF_SEGMENT_DSN=sqlite:"+filepath.Join(dir, "leaf.db"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("leaf-server with the image's environment and LEAF_SEGMENT_DSN=sqlite:…: %v\n%s", err, out)
	}
}
