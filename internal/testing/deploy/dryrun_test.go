package deploy_test

import (
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/k8stest"
)

// TestManifestsServerDryRun: a real kube-apiserver (internal/k8stest, `make
// k8s`) accepts the base and both overlays with server-side apply in
// dry-run mode: every object passes the API server's validation and
// admission, not only kustomize's rendering.
func TestManifestsServerDryRun(t *testing.T) {
	kubectl := tool(t, "kubectl", kubectlInstall)
	c := k8stest.Start(t)
	ns := c.Namespace(t)
	for _, dir := range []string{"deploy/kubernetes", "deploy/kubernetes/overlays/postgres", "deploy/kubernetes/overlays/mysql"} {
		rendered := string(run(t, kubectl, "kustomize", repo(dir)))
		out := c.Kubectl(t, rendered, "apply", "--server-side", "--dry-run=server", "--field-manager", "leaf-go-test", "-n", ns, "-f", "-")
		for _, want := range []string{"serviceaccount/leaf-go", "role.rbac.authorization.k8s.io/leaf-go",
			"rolebinding.rbac.authorization.k8s.io/leaf-go", "service/leaf-go", "service/leaf-go-headless",
			"statefulset.apps/leaf-go", "poddisruptionbudget.policy/leaf-go"} {
			if !strings.Contains(out, want+" serverside-applied (server dry run)") {
				t.Errorf("%s: kubectl apply --dry-run=server did not apply %s:\n%s", dir, want, out)
			}
		}
	}
	// Dry run: nothing was created.
	if out := c.Kubectl(t, "", "get", "statefulsets,roles", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("after a dry run the namespace holds %s", out)
	}
}
