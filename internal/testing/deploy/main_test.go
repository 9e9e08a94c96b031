// Package deploy_test checks deploy/: the kustomize base and overlays of
// deploy/kubernetes (rendered with kubectl kustomize, and accepted by a real
// kube-apiserver with server-side dry-run on the internal/k8stest bed), the
// Prometheus alert rules of deploy/prometheus (promtool test rules) and the
// Grafana dashboard of deploy/grafana (every query names a series that a
// real leaf-server exports). It lives in the test module for its YAML
// parser.
package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/leaf-go/leaf/internal/servertest"
)

// serverBin is the leaf-server binary built once by TestMain (with -race
// when the tests run with it).
var serverBin string

func TestMain(m *testing.M) { servertest.Run(m, &serverBin, nil) }

// repo returns the repository root's path joined with elem.
func repo(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", "..", ".."}, elem...)...)
}

// tool returns the path of the command name, or skips the test (fails it
// with CI=true) saying how to install it. -short skips too: the tools are
// not part of the quick loop.
func tool(t *testing.T, name, install string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped in -short mode: needs %s", name)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (%v): %s", name, err, install)
		}
		t.Skipf("%s not found (%v): %s", name, err, install)
	}
	return p
}

// kubectlInstall says where kubectl with kustomize comes from.
const kubectlInstall = "install kubectl (it includes kustomize): https://kubernetes.io/docs/tasks/tools/"

// run runs a command and returns its standard output, failing the test with
// its standard error.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	return stdout.Bytes()
}

// envSettings asks leaf-server which LEAF_* variables it reads (its -h lists
// every flag with its variable). Copied from
// internal/testing/cmd/leaf-server/compose_test.go: keep the two in step.
func envSettings(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command(serverBin, "-h").CombinedOutput() // -h exits non-zero
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`env (LEAF_[A-Z0-9_]+)`).FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	if len(known) == 0 {
		t.Fatalf("leaf-server -h lists no LEAF_* variable:\n%s", out)
	}
	return known
}
