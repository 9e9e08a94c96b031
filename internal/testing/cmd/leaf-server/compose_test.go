package leafserver_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/leaf-go/leaf/internal/servertest"
)

// composeFile is the part of docker-compose.yml the test checks.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Ports []string `yaml:"ports"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// TestComposeFile parses docker-compose.yml (no container engine runs here)
// and checks its wiring: every service has a health check, leaf-server waits
// for healthy dependencies, and every LEAF_* variable is a real setting
// (asked of the leaf-server binary, so the test skips under -short).
func TestComposeFile(t *testing.T) {
	servertest.SkipShort(t)
	raw, err := os.ReadFile("../../../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(false)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	for _, want := range []string{"leaf-server", "postgres", "mariadb", "zookeeper"} {
		if _, ok := c.Services[want]; !ok {
			t.Errorf("service %q missing", want)
		}
	}
	known := envSettings(t)
	for name, s := range c.Services {
		if len(s.Healthcheck.Test) == 0 {
			t.Errorf("service %q has no health check", name)
		}
		if (s.Image == "") == (s.Build == nil) {
			t.Errorf("service %q needs exactly one of image and build", name)
		}
		for dep, d := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("service %q depends on unknown %q", name, dep)
			}
			if d.Condition != "service_healthy" {
				t.Errorf("service %q waits for %q with condition %q, want service_healthy", name, dep, d.Condition)
			}
		}
		for k, v := range s.Environment {
			if !strings.HasPrefix(k, "LEAF_") {
				continue
			}
			if !known[k] {
				t.Errorf("service %q sets %s, which is no leaf-server setting", name, k)
				continue
			}
			// The value must be accepted by the flag it feeds.
			if err := acceptsEnv(k, v); err != nil {
				t.Errorf("service %q: %s=%q rejected: %v", name, k, v, err)
			}
		}
		if strings.HasPrefix(name, "leaf-server") {
			if s.Build == nil {
				t.Errorf("service %q should build this repository's Dockerfile", name)
			}
			if s.Environment["LEAF_LISTEN"] == "" || strings.HasPrefix(s.Environment["LEAF_LISTEN"], "127.") {
				t.Errorf("service %q listens on %q: a container must listen on 0.0.0.0", name, s.Environment["LEAF_LISTEN"])
			}
		}
	}
	if _, err := os.Stat("../../../../Dockerfile"); err != nil {
		t.Errorf("Dockerfile missing: %v", err)
	}
}

// envSettings returns the LEAF_* variable of every leaf-server setting, as
// `leaf-server -h` lists them ("env LEAF_SEGMENT_DSN, default …").
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

// acceptsEnv runs `leaf-server --print-config` with name=value as the only
// LEAF_* variable and returns the error leaf-server reports when the flag
// that name feeds rejects value (the message starts with name=), else nil.
// Other errors (a setting that needs another, e.g. --zk for ZooKeeper worker
// IDs) are not the value's fault.
func acceptsEnv(name, value string) error {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEAF_") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(serverBin, "--print-config")
	cmd.Env = append(env, name+"="+value)
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), name+"=") {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
