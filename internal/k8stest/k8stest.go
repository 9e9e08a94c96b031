//go:build linux

// Package k8stest starts a private Kubernetes API server for one test: a kube-apiserver built
// from the Go module proxy at KubernetesVersion (build.sh, `make k8s`; cached in
// ~/.cache/leaf-go/kube-apiserver-<version>) on a private one-member etcd from Debian's
// etcd-server (/usr/bin/etcd), on loopback ports of its own (PortLow..PortHigh). No kubelet,
// scheduler or controller manager: what the API server alone does (Leases, RBAC, server-side
// dry-run of manifests, TokenRequest for service accounts) is what leaf-go needs from it.
//
// The server runs with RBAC (--authorization-mode RBAC), a static token file holding one admin
// token (group system:masters), self-signed serving certificates it writes into --cert-dir
// (the client trusts that file) and a service-account key pair made with openssl, so that
// [Cluster.ServiceAccountToken] can hand a test a token bound only to the Role it applied:
// least privilege is checked, not assumed.
//
// Skip rules, as `make tidb`'s TestTiDB: the tests run only when LEAF_TEST_KUBE_APISERVER names
// the kube-apiserver binary, which `make k8s` builds (cached in
// ~/.cache/leaf-go/kube-apiserver-<version>) and sets; without it the test is skipped with how
// to run it, even with CI=true: `make test` and CI do not build it (the first build takes
// minutes of both cores: the Makefile's k8s target says what it costs). Under -short it is
// skipped too. With the variable set, a missing binary, etcd, openssl or kubectl, or a server
// that does not come up fails the test.
package k8stest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/leaf-go/leaf/internal/porttest"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// KubernetesVersion is the kube-apiserver release the test bed runs; leaf-server's client-go is
// the matching v0.x of it.
const KubernetesVersion = "v1.37.2"

// Port range: k8stest takes the API server's secure port and its etcd's client and peer ports
// from [PortLow, PortHigh], set aside for the Kubernetes tests of this repository (etcdtest
// has 24200..24299), skipping ports that are in use.
const (
	PortLow  = 24400
	PortHigh = 24499
)

// EnvBinary names the environment variable with the kube-apiserver binary's path. `make k8s`
// sets it; unset, every test that needs the API server is skipped (see the package doc).
const EnvBinary = "LEAF_TEST_KUBE_APISERVER"

// adminToken is the static bearer token of the admin user (group system:masters).
const adminToken = "leaf-k8stest-admin"

// DefaultBinary returns where build.sh caches kube-apiserver:
// $HOME/.cache/leaf-go/kube-apiserver-<KubernetesVersion>/kube-apiserver.
func DefaultBinary() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "leaf-go", "kube-apiserver-"+KubernetesVersion, "kube-apiserver")
}

// Cluster is a running private API server with its etcd. Its methods are safe for concurrent
// use, except that StopAPIServer and StartAPIServer must not race each other.
type Cluster struct {
	// URL is the API server's base URL, https://127.0.0.1:<port>.
	URL string
	// CAFile is the PEM file that verifies the server's certificate.
	CAFile string

	bin, dir string
	port     int
	etcdURL  string
	etcd     *proc

	mu  sync.Mutex // guards api
	api *proc
}

// proc is one child process with its log file.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  string
}

// Start starts etcd and kube-apiserver and waits until /readyz answers 200 (about 10 to 25 s on
// 2 cores); both are killed when the test ends, and their logs' tails shown if it failed.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("k8stest: skipped in -short mode: needs a private kube-apiserver (make k8s)")
	}
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		t.Skipf("k8stest: %s is not set: `make k8s` builds kube-apiserver %s once (cached at %s), sets it and runs the Kubernetes tests (not part of `make test`)",
			EnvBinary, KubernetesVersion, DefaultBinary())
	}
	if _, err := os.Stat(bin); err != nil {
		unavailable(t, fmt.Sprintf("%s=%s: %v", EnvBinary, bin, err))
	}
	for _, tool := range []string{"etcd", "openssl", "kubectl"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "k8stest: "+tool+" not found: "+err.Error()+" (etcd: apt-get install etcd-server; openssl: apt-get install openssl; kubectl with kustomize: https://kubernetes.io/docs/tasks/tools/)")
		}
	}
	c := &Cluster{bin: bin, dir: t.TempDir()}
	t.Cleanup(func() {
		c.mu.Lock()
		api := c.api
		c.mu.Unlock()
		api.kill()
		c.etcd.kill()
		if t.Failed() {
			t.Logf("kube-apiserver log (tail):\n%s", tailFile(filepath.Join(c.dir, "kube-apiserver.log"), 3000))
			t.Logf("etcd log (tail):\n%s", tailFile(filepath.Join(c.dir, "etcd.log"), 1000))
		}
	})
	if err := c.start(); err != nil {
		unavailable(t, "k8stest: the private API server did not start: "+err.Error()+
			"\nkube-apiserver log (tail):\n"+tailFile(filepath.Join(c.dir, "kube-apiserver.log"), 3000))
	}
	return c
}

// start makes the credentials, starts etcd and the API server and waits for /readyz.
func (c *Cluster) start() error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	c.port = ports[0]
	c.URL = "https://127.0.0.1:" + strconv.Itoa(c.port)
	c.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[2])
	for _, args := range [][]string{
		{"genrsa", "-out", filepath.Join(c.dir, "sa.key"), "2048"},
		{"rsa", "-in", filepath.Join(c.dir, "sa.key"), "-pubout", "-out", filepath.Join(c.dir, "sa.pub")},
	} {
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("openssl %s: %w: %s", args[0], err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(c.dir, "tokens.csv"),
		[]byte(adminToken+`,admin,admin-uid,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}
	etcdDir := filepath.Join(c.dir, "etcd")
	c.etcd, err = run(filepath.Join(c.dir, "etcd.log"), "etcd",
		"--name", "k8stest",
		"--data-dir", etcdDir,
		"--listen-client-urls", c.etcdURL, "--advertise-client-urls", c.etcdURL,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "k8stest="+peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr")
	if err != nil {
		return err
	}
	if err := waitTCP(strings.TrimPrefix(c.etcdURL, "http://"), c.etcd, 20*time.Second); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return c.startAPIServer()
}

// startAPIServer starts kube-apiserver on the cluster's port and waits until /readyz is 200.
func (c *Cluster) startAPIServer() error {
	certDir := filepath.Join(c.dir, "certs")
	p, err := run(filepath.Join(c.dir, "kube-apiserver.log"), c.bin,
		"--etcd-servers", c.etcdURL,
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(c.port),
		"--cert-dir", certDir,
		"--token-auth-file", filepath.Join(c.dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(c.dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(c.dir, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--api-audiences", "https://kubernetes.default.svc.cluster.local",
		// One API server and no controllers: nothing reconciles the kubernetes Service's
		// endpoints, so skip the reconciler.
		"--endpoint-reconciler-type", "none",
	)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.api = p
	c.mu.Unlock()
	c.CAFile = filepath.Join(certDir, "apiserver.crt")
	return c.waitReady(p, 90*time.Second)
}

// waitReady polls /readyz until it answers 200, p exits or timeout passes.
func (c *Cluster) waitReady(p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("kube-apiserver exited: %s", p.cmd.ProcessState)
		default:
		}
		if _, err := os.Stat(c.CAFile); err == nil {
			code, body, err := c.get("/readyz")
			if err == nil && code == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s %v", code, tail(body, 300), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("/readyz not 200 after %v: %s", timeout, last)
}

// get asks the API server for path as the admin.
func (c *Cluster) get(path string) (int, string, error) {
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return 0, "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return 0, "", errors.New("no certificate in " + c.CAFile)
	}
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer cl.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, c.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), nil
}

// StopAPIServer stops kube-apiserver with SIGTERM (SIGKILL after 20 s) and waits for it to
// exit; etcd keeps running, so StartAPIServer brings back every object.
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	p := c.api
	c.mu.Unlock()
	p.stop(20 * time.Second)
}

// StartAPIServer starts kube-apiserver again on the same port, data and credentials, and
// waits until /readyz answers 200.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	if err := c.startAPIServer(); err != nil {
		t.Fatalf("k8stest: restart kube-apiserver: %v", err)
	}
}

// Kubeconfig writes a kubeconfig for token (the admin's when token is "") whose context's
// namespace is namespace ("" means default), and returns its path. The file trusts CAFile.
func (c *Cluster) Kubeconfig(t testing.TB, token, namespace string) string {
	t.Helper()
	user := "user"
	if token == "" {
		token, user = adminToken, "admin"
	}
	if namespace == "" {
		namespace = "default"
	}
	f, err := os.CreateTemp(c.dir, "kubeconfig-"+user+"-*")
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(f, `apiVersion: v1
kind: Config
clusters:
- name: k8stest
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: k8stest
  context:
    cluster: k8stest
    user: %s
    namespace: %s
current-context: k8stest
`, c.URL, c.CAFile, user, token, user, namespace)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// Kubectl runs kubectl as the admin with args and returns its standard output; stdin, when
// not empty, is its standard input. A failure fails the test with kubectl's error output.
func (c *Cluster) Kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := c.KubectlErr(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// KubectlErr is Kubectl returning the error (with kubectl's standard error) instead of
// failing the test.
func (c *Cluster) KubectlErr(stdin string, args ...string) (string, error) {
	kc := filepath.Join(c.dir, "admin.kubeconfig")
	if _, err := os.Stat(kc); err != nil {
		if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: k8stest
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: k8stest
  context: {cluster: k8stest, user: admin}
current-context: k8stest
`, c.URL, c.CAFile, adminToken)), 0o600); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", kc}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Namespace creates a namespace named after the test plus a unique suffix and returns its
// name.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	c.Kubectl(t, "", "create", "namespace", name)
	return name
}

// ServiceAccountToken returns a token of the service account sa in namespace (which must
// exist: apply it first), made with the TokenRequest API (`kubectl create token`), valid for
// an hour. The API server authenticates it as system:serviceaccount:<namespace>:<sa>, so
// the token can do exactly what that account's RoleBindings allow.
func (c *Cluster) ServiceAccountToken(t testing.TB, namespace, sa string) string {
	t.Helper()
	return strings.TrimSpace(c.Kubectl(t, "", "create", "token", sa, "-n", namespace, "--duration", "1h"))
}

// run starts bin with args, its output appended to logPath.
func run(logPath, bin string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit. nil-safe.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// kill sends SIGKILL and waits for the exit. nil-safe.
func (p *proc) kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitTCP waits until addr accepts connections, p exits or timeout passes.
func waitTCP(addr string, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return errors.New("exited: " + tailFile(p.log, 500))
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = conn.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening after %v", addr, timeout)
}

// portRange is the loopback ports of this test bed, [PortLow, PortHigh].
var portRange = porttest.NewRange(PortLow, PortHigh)

// freePorts returns n ports of [PortLow, PortHigh] that nobody listens on now.
func freePorts(n int) ([]int, error) { return portRange.Free(n) }

// unavailable fails t with msg: the test bed was asked for (EnvBinary set) and cannot start.
func unavailable(t testing.TB, msg string) {
	t.Helper()
	t.Fatal(msg)
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return tail(string(b), n)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
