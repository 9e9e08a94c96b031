package k8sworker

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Client is the part of the Kubernetes API a Worker uses: coordination.k8s.io/v1 Leases, read
// and written through client-go's REST client (k8s.io/client-go/rest) with a scheme that knows
// only the Lease types and metav1's Status and options. client-go's clientset, and even its
// typed coordination/v1 client alone, import k8s.io/client-go/kubernetes/scheme, which
// registers every built-in API group's types: about 23 MB of leaf-server's binary for one
// resource (BENCHMARKS.md). Errors are client-go's (*apierrors.StatusError for an API
// answer), so apierrors.IsNotFound and IsConflict hold as with the clientset. Safe for
// concurrent use.
type Client struct {
	rc *rest.RESTClient
}

// NewClient returns a Client for cfg with a rate limit that renewals and high-water stores
// never reach (20 requests/s, bursts of 40) and the user agent "leaf-go".
func NewClient(cfg *rest.Config) (*Client, error) {
	s := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("k8sworker: scheme: %w", err)
	}
	// Status (the body of an error answer) and the list and write options, as client-go's
	// scheme registers them for the core group.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20, 40
	cfg.UserAgent = "leaf-go"
	cfg.GroupVersion = &coordinationv1.SchemeGroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("k8sworker: client: %w", err)
	}
	return &Client{rc: rc}, nil
}

// list returns the Leases of namespace ns.
func (c *Client) list(ctx context.Context, ns string) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	err := c.rc.Get().Namespace(ns).Resource("leases").Do(ctx).Into(out)
	return out, err
}

// get returns the Lease ns/name.
func (c *Client) get(ctx context.Context, ns, name string) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rc.Get().Namespace(ns).Resource("leases").Name(name).Do(ctx).Into(out)
	return out, err
}

// create creates l in its namespace; an existing one of that name is a 409 AlreadyExists.
func (c *Client) create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rc.Post().Namespace(l.Namespace).Resource("leases").Body(l).Do(ctx).Into(out)
	return out, err
}

// update replaces l under its resourceVersion (409 Conflict when the Lease has been written
// since; 404 when it is gone).
func (c *Client) update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rc.Put().Namespace(l.Namespace).Resource("leases").Name(l.Name).Body(l).Do(ctx).Into(out)
	return out, err
}
