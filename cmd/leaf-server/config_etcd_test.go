package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestConfigEtcd: the etcd source's flags and their LEAF_* twins, the default prefix, the
// worker-ID range and peer-skew checks, and the password never printed.
func TestConfigEtcd(t *testing.T) {
	l, err := parseConfig([]string{"--worker-id-source", "etcd", "--leaf-name", "orders", "--worker-id-min", "4"},
		env(map[string]string{"LEAF_ETCD_ENDPOINTS": "10.0.0.1:2379,10.0.0.2:2379", "LEAF_ETCD_PASSWORD": "pa55word",
			"LEAF_WORKER_ID_MAX": "9", "LEAF_MAX_PEER_CLOCK_SKEW": "3s"}), func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	c := l.Config
	if c.EtcdEndpoints != "10.0.0.1:2379,10.0.0.2:2379" || c.etcdPrefix() != "/leaf-go/orders" ||
		c.WorkerIDMin != 4 || c.WorkerIDMax != 9 || c.MaxPeerClockSkew != 3*time.Second || c.EtcdPassword != "pa55word" {
		t.Fatalf("parsed %+v", c)
	}
	var out bytes.Buffer
	l.printConfig(&out)
	if strings.Contains(out.String(), "pa55word") || !strings.Contains(out.String(), "etcd-password") {
		t.Fatalf("print-config shows the etcd password or omits the flag:\n%s", out.String())
	}
	d := DefaultConfig()
	if d.WorkerIDMin != 0 || d.WorkerIDMax != -1 || d.MaxPeerClockSkew != 10*time.Second {
		t.Fatalf("defaults min %d max %d skew %v, want 0, -1, 10s", d.WorkerIDMin, d.WorkerIDMax, d.MaxPeerClockSkew)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no endpoints":    {[]string{"--worker-id-source", "etcd"}, "needs --etcd-endpoints"},
		"bad prefix":      {[]string{"--worker-id-source", "etcd", "--etcd-endpoints", "h:1", "--etcd-prefix", "x/"}, "--etcd-prefix"},
		"min above max":   {[]string{"--worker-id-source", "etcd", "--etcd-endpoints", "h:1", "--worker-id-min", "5", "--worker-id-max", "4"}, "--worker-id-min 5"},
		"max past layout": {[]string{"--worker-id-source", "etcd", "--etcd-endpoints", "h:1", "--worker-id-max", "1024"}, "want 0 <= min <= max <= 1023"},
		"negative skew":   {[]string{"--worker-id-source", "etcd", "--etcd-endpoints", "h:1", "--max-peer-clock-skew", "-1s"}, "--max-peer-clock-skew"},
		"unknown source":  {[]string{"--worker-id-source", "consul"}, "want static, zookeeper, sql, etcd or kubernetes"},
	} {
		_, err := parseConfig(tc.args, env(nil), func(string) {})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}
