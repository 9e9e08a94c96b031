package main

import (
	"strings"
	"testing"
	"time"
)

// TestKubernetesConfig: the kubernetes source's flags, their defaults and their refusals.
func TestKubernetesConfig(t *testing.T) {
	c, err := parseConfig([]string{"--worker-id-source", "kubernetes", "--leaf-name", "Orders_Prod"}, env(nil), func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.kubernetesLeasePrefix(); got != "orders-prod-worker-" {
		t.Errorf("default lease prefix for --leaf-name Orders_Prod = %q, want orders-prod-worker-", got)
	}
	if c.KubernetesLeaseDuration != 15*time.Second {
		t.Errorf("default lease duration %v, want 15s", c.KubernetesLeaseDuration)
	}
	c, err = parseConfig([]string{"--worker-id-source", "kubernetes", "--kubernetes-lease-prefix", "ids-"},
		env(map[string]string{"LEAF_KUBERNETES_LEASE_DURATION": "30s"}), func(string) {})
	if err != nil || c.kubernetesLeasePrefix() != "ids-" || c.KubernetesLeaseDuration != 30*time.Second {
		t.Errorf("prefix ids-, LEAF_KUBERNETES_LEASE_DURATION=30s: %+v %v", c.kubernetesLeasePrefix(), err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"upper-case prefix": {[]string{"--worker-id-source", "kubernetes", "--kubernetes-lease-prefix", "IDs-"}, "--kubernetes-lease-prefix"},
		"short duration":    {[]string{"--worker-id-source", "kubernetes", "--kubernetes-lease-duration", "2s"}, "--kubernetes-lease-duration 2s"},
		"fractional":        {[]string{"--worker-id-source", "kubernetes", "--kubernetes-lease-duration", "4500ms"}, "whole seconds"},
		"range past layout": {[]string{"--worker-id-source", "kubernetes", "--worker-id-max", "1024"}, "want 0 <= min <= max <= 1023"},
	} {
		_, err := parseConfig(tc.args, env(nil), func(string) {})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}
