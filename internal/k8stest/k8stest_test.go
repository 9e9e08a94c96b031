//go:build linux

package k8stest

import (
	"os"
	"strings"
	"testing"
)

// TestCluster: the API server comes up; the admin applies a Lease and reads it back; a service
// account bound by a Role to leases in its namespace may update leases there and nothing else
// (no secrets, no leases in another namespace); after a restart of the API server the Lease is
// still there.
func TestCluster(t *testing.T) {
	c := Start(t)
	ns := c.Namespace(t)
	c.Kubectl(t, `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: k8stest-lease
spec:
  holderIdentity: someone
  leaseDurationSeconds: 15
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: leaser
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: leaser
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: leaser
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leaser}
subjects:
- {kind: ServiceAccount, name: leaser}
`, "apply", "-n", ns, "-f", "-")
	if got := c.Kubectl(t, "", "get", "lease", "k8stest-lease", "-n", ns, "-o", "jsonpath={.spec.holderIdentity}"); got != "someone" {
		t.Fatalf("lease holderIdentity = %q, want someone", got)
	}

	token := c.ServiceAccountToken(t, ns, "leaser")
	kc := c.Kubeconfig(t, token, ns)
	other := c.Namespace(t)
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"update", "leases"}, "yes"},
		{[]string{"delete", "leases"}, "yes"},
		{[]string{"get", "secrets"}, "no"},
		{[]string{"create", "pods"}, "no"},
		{[]string{"get", "leases", "-n", other}, "no"},
	}
	for _, tt := range tests {
		out, _ := c.KubectlErr("", append([]string{"--kubeconfig", kc, "auth", "can-i"}, tt.give...)...)
		if got := strings.TrimSpace(out); got != tt.want {
			t.Errorf("service account: can-i %v = %q, want %q", tt.give, got, tt.want)
		}
	}
	// The token itself, not only can-i: reading the Lease works, listing secrets is refused.
	if _, err := c.KubectlErr("", "--kubeconfig", kc, "get", "lease", "k8stest-lease"); err != nil {
		t.Errorf("service account: get lease: %v", err)
	}
	if _, err := c.KubectlErr("", "--kubeconfig", kc, "get", "secrets"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("service account: get secrets: err = %v, want forbidden", err)
	}

	c.StopAPIServer()
	if _, err := c.KubectlErr("", "get", "lease", "k8stest-lease", "-n", ns, "--request-timeout", "2s"); err == nil {
		t.Error("kubectl get succeeded with the API server stopped")
	}
	c.StartAPIServer(t)
	if got := c.Kubectl(t, "", "get", "lease", "k8stest-lease", "-n", ns, "-o", "jsonpath={.spec.holderIdentity}"); got != "someone" {
		t.Fatalf("after restart: lease holderIdentity = %q, want someone", got)
	}
}

// TestDefaultBinary: the cache path build.sh writes is the one Start's skip message names.
func TestDefaultBinary(t *testing.T) {
	b, err := os.ReadFile("build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`K8S_VERSION=${K8S_VERSION:-` + KubernetesVersion + `}`,
		`$HOME/.cache/leaf-go/kube-apiserver-$K8S_VERSION`, `bin=$K8S_CACHE/kube-apiserver`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("build.sh lacks %q: DefaultBinary() = %s would not find its binary", want, DefaultBinary())
		}
	}
}
