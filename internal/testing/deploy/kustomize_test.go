package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// object is the part of a rendered Kubernetes object the tests read.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Rules []struct {
		APIGroups []string `yaml:"apiGroups"`
		Resources []string `yaml:"resources"`
		Verbs     []string `yaml:"verbs"`
	} `yaml:"rules"`
	RoleRef struct {
		Kind string `yaml:"kind"`
		Name string `yaml:"name"`
	} `yaml:"roleRef"`
	Subjects []struct {
		Kind string `yaml:"kind"`
		Name string `yaml:"name"`
	} `yaml:"subjects"`
	Spec spec `yaml:"spec"`
}

// spec holds the fields of the StatefulSet, Service and PodDisruptionBudget
// specs the tests read.
type spec struct {
	// Service
	ClusterIP string            `yaml:"clusterIP"`
	Selector  map[string]string `yaml:"-"`
	// StatefulSet and PodDisruptionBudget
	LabelSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"-"`
	ServiceName string `yaml:"serviceName"`
	Replicas    int    `yaml:"replicas"`
	Template    struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			ServiceAccountName string `yaml:"serviceAccountName"`
			SecurityContext    struct {
				RunAsNonRoot bool `yaml:"runAsNonRoot"`
				RunAsUser    int  `yaml:"runAsUser"`
				FSGroup      int  `yaml:"fsGroup"`
			} `yaml:"securityContext"`
			Containers []container `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	} `yaml:"volumeClaimTemplates"`
	MaxUnavailable any `yaml:"maxUnavailable"`
}

type container struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	Env   []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe  probe `yaml:"livenessProbe"`
	ReadinessProbe probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

// render runs `kubectl kustomize dir` and decodes every object.
func render(t *testing.T, dir string) (map[string]object, []byte) {
	t.Helper()
	kubectl := tool(t, "kubectl", kubectlInstall)
	out := run(t, kubectl, "kustomize", repo(dir))
	objs := map[string]object{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kubectl kustomize %s: output does not parse: %v", dir, err)
		}
		var o object
		if err := node.Decode(&o); err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		// The selector is a label map for a Service, a LabelSelector elsewhere.
		var sel struct {
			Spec struct {
				Selector yaml.Node `yaml:"selector"`
			} `yaml:"spec"`
		}
		_ = node.Decode(&sel)
		if o.Kind == "Service" {
			_ = sel.Spec.Selector.Decode(&o.Spec.Selector)
		} else {
			_ = sel.Spec.Selector.Decode(&o.Spec.LabelSelector)
		}
		key := o.Kind + "/" + o.Metadata.Name
		if _, dup := objs[key]; dup {
			t.Errorf("kubectl kustomize %s: %s twice", dir, key)
		}
		objs[key] = o
	}
	return objs, out
}

// TestKustomizeBase renders deploy/kubernetes and checks what
// deploy/kubernetes.md promises: least privilege (a Role on leases only),
// the downward-API identity leaf-server reads, probes, resources, a
// non-root read-only container with a volume claim for --data-dir, Services
// and a PodDisruptionBudget that select the pods, and only LEAF_* variables
// leaf-server knows.
func TestKustomizeBase(t *testing.T) {
	objs, _ := render(t, "deploy/kubernetes")
	want := []string{"ServiceAccount/leaf-go", "Role/leaf-go", "RoleBinding/leaf-go", "Service/leaf-go",
		"Service/leaf-go-headless", "StatefulSet/leaf-go", "PodDisruptionBudget/leaf-go"}
	for _, k := range want {
		if _, ok := objs[k]; !ok {
			t.Errorf("rendered base lacks %s", k)
		}
	}
	if len(objs) != len(want) {
		keys := make([]string, 0, len(objs))
		for k := range objs {
			keys = append(keys, k)
		}
		t.Errorf("rendered base has %d objects %v, want %d %v", len(objs), keys, len(want), want)
	}

	role := objs["Role/leaf-go"]
	if len(role.Rules) != 1 {
		t.Fatalf("Role has %d rules, want 1 (leases)", len(role.Rules))
	}
	r := role.Rules[0]
	if !slices.Equal(r.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(r.Resources, []string{"leases"}) {
		t.Errorf("Role rule on %v %v, want coordination.k8s.io leases only", r.APIGroups, r.Resources)
	}
	for _, v := range r.Verbs {
		if !slices.Contains([]string{"get", "list", "create", "update"}, v) {
			t.Errorf("Role grants verb %q on leases: more than get, list, create, update", v)
		}
	}
	rb := objs["RoleBinding/leaf-go"]
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != "leaf-go" || len(rb.Subjects) != 1 ||
		rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != "leaf-go" {
		t.Errorf("RoleBinding binds %+v to %+v, want Role leaf-go to ServiceAccount leaf-go", rb.RoleRef, rb.Subjects)
	}

	sts := objs["StatefulSet/leaf-go"].Spec
	pod := sts.Template.Spec
	podLabels := sts.Template.Metadata.Labels
	if pod.ServiceAccountName != "leaf-go" {
		t.Errorf("pod service account %q, want leaf-go", pod.ServiceAccountName)
	}
	if head := objs["Service/"+sts.ServiceName]; head.Spec.ClusterIP != "None" {
		t.Errorf("serviceName %q is not a headless Service (clusterIP %q)", sts.ServiceName, head.Spec.ClusterIP)
	}
	for _, k := range []string{"Service/leaf-go", "Service/leaf-go-headless"} {
		if sel := objs[k].Spec.Selector; len(sel) == 0 || !subset(sel, podLabels) {
			t.Errorf("%s selects %v, not the pods' labels %v", k, sel, podLabels)
		}
	}
	for _, k := range []string{"StatefulSet/leaf-go", "PodDisruptionBudget/leaf-go"} {
		if sel := objs[k].Spec.LabelSelector.MatchLabels; len(sel) == 0 || !subset(sel, podLabels) {
			t.Errorf("%s selects %v, not the pods' labels %v", k, sel, podLabels)
		}
	}
	if objs["PodDisruptionBudget/leaf-go"].Spec.MaxUnavailable == nil {
		t.Error("PodDisruptionBudget sets no maxUnavailable")
	}
	sc := pod.SecurityContext
	if !sc.RunAsNonRoot || sc.RunAsUser == 0 || sc.FSGroup == 0 {
		t.Errorf("pod securityContext %+v, want runAsNonRoot with a non-zero user and fsGroup (the volume writable)", sc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.AllowPrivilegeEscalation == nil ||
		*c.SecurityContext.AllowPrivilegeEscalation || !slices.Contains(c.SecurityContext.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext %+v, want a read-only root filesystem, no privilege escalation, all capabilities dropped", c.SecurityContext)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes: liveness %q, readiness %q; want /healthz and /readyz", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v, want cpu and memory requests and a memory limit", c.Resources)
	}

	fields := map[string]string{}
	values := map[string]string{}
	known := envSettings(t)
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		} else if e.ValueFrom == nil {
			values[e.Name] = e.Value
		}
		if strings.HasPrefix(e.Name, "LEAF_") && !known[e.Name] {
			t.Errorf("env %s is not a leaf-server setting (leaf-server -h)", e.Name)
		}
	}
	for name, path := range map[string]string{
		"POD_NAME":      "metadata.name",
		"POD_NAMESPACE": "metadata.namespace",
		"POD_INDEX":     "metadata.labels['apps.kubernetes.io/pod-index']",
	} {
		if fields[name] != path {
			t.Errorf("env %s from fieldRef %q, want %q", name, fields[name], path)
		}
	}
	if values["LEAF_WORKER_ID_SOURCE"] != "kubernetes" {
		t.Errorf("LEAF_WORKER_ID_SOURCE = %q, want kubernetes", values["LEAF_WORKER_ID_SOURCE"])
	}
	if values["LEAF_SEGMENT"] != "false" {
		t.Errorf("base LEAF_SEGMENT = %q, want false (segment mode needs an overlay's shared database)", values["LEAF_SEGMENT"])
	}
	dataDir := values["LEAF_DATA_DIR"]
	if len(sts.VolumeClaimTemplates) != 1 {
		t.Fatalf("%d volumeClaimTemplates, want 1 (for --data-dir)", len(sts.VolumeClaimTemplates))
	}
	claim := sts.VolumeClaimTemplates[0].Metadata.Name
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == claim && m.MountPath == dataDir)
	}
	if dataDir == "" || !mounted {
		t.Errorf("LEAF_DATA_DIR %q is not the mount of the volume claim %q: %+v", dataDir, claim, c.VolumeMounts)
	}
}

// TestKustomizeOverlays: each overlay turns segment mode on with its DSN
// from its own Secret, and changes nothing else of the base's identity.
func TestKustomizeOverlays(t *testing.T) {
	for _, db := range []string{"postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			objs, _ := render(t, "deploy/kubernetes/overlays/"+db)
			c := objs["StatefulSet/leaf-go"].Spec.Template.Spec.Containers[0]
			var segment, source string
			var dsn *struct{ Name, Key string }
			count := map[string]int{}
			for _, e := range c.Env {
				count[e.Name]++
				switch e.Name {
				case "LEAF_SEGMENT":
					segment = e.Value
				case "LEAF_WORKER_ID_SOURCE":
					source = e.Value
				case "LEAF_SEGMENT_DSN":
					if e.Value != "" {
						t.Errorf("LEAF_SEGMENT_DSN has a literal value in the manifest")
					}
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						dsn = &struct{ Name, Key string }{e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key}
					}
				}
			}
			for name, n := range count {
				if n > 1 {
					t.Errorf("env %s set %d times", name, n)
				}
			}
			if segment != "true" || source != "kubernetes" {
				t.Errorf("LEAF_SEGMENT %q, LEAF_WORKER_ID_SOURCE %q; want true and kubernetes", segment, source)
			}
			if dsn == nil || dsn.Name != "leaf-go-"+db || dsn.Key != "dsn" {
				t.Errorf("LEAF_SEGMENT_DSN from %+v, want Secret leaf-go-%s key dsn", dsn, db)
			}
			if _, ok := objs["Role/leaf-go"]; !ok {
				t.Error("overlay lost the base's Role")
			}
		})
	}
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
