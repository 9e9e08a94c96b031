package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.3", Commit: "0123456789abcdef0123", GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"v1.2.3 (commit 0123456789ab, go1.26.8, linux/amd64)"},
		{Info{Version: "(devel)", Commit: "abc", Modified: true, GoVersion: "go1.26.8", Platform: "darwin/arm64"},
			"(devel) (commit abc, modified, go1.26.8, darwin/arm64)"},
		{Info{Version: "(devel)", GoVersion: "go1.26.8", Platform: "windows/amd64"},
			"(devel) (go1.26.8, windows/amd64)"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestReadInTest(t *testing.T) {
	in := Read()
	if in.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", in.GoVersion, runtime.Version())
	}
	if in.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Platform = %q", in.Platform)
	}
	if in.Version == "" {
		t.Error("Version is empty; want the module version, (devel) or (unknown)")
	}
}

// TestLinkTimeVersion builds a small program against this package with
// -ldflags -X and checks that the version set at link time is the one it
// reports, and that the commit of this checkout is recorded.
func TestLinkTimeVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "leaf-server")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command("go", "build", "-buildvcs=auto", "-pgo=off", "-o", bin,
		"-ldflags", "-X github.com/leaf-go/leaf/internal/buildinfo.version=v9.8.7-test",
		"github.com/leaf-go/leaf/cmd/leaf-server")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("leaf-server --version: %v\n%s", err, out)
	}
	line := strings.TrimSpace(string(out))
	if !strings.HasPrefix(line, "leaf-server v9.8.7-test (") || !strings.Contains(line, runtime.Version()) {
		t.Errorf("leaf-server --version printed %q, want leaf-server v9.8.7-test (… %s …)", line, runtime.Version())
	}
	// The commit is what the toolchain recorded (none in a git worktree, where
	// Go's VCS stamping finds no .git directory): --version must show that one
	// and never another.
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	rev := ""
	for _, l := range strings.Split(string(meta), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
			rev = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	switch {
	case rev != "" && !strings.Contains(line, "commit "+rev[:12]):
		t.Errorf("leaf-server --version printed %q, want the recorded commit %s", line, rev[:12])
	case rev == "" && strings.Contains(line, "commit "):
		t.Errorf("leaf-server --version printed %q, but the binary records no commit", line)
	}
	t.Logf("recorded commit %q; --version: %s", rev, line)
}
