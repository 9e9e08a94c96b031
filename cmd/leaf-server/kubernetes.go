package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/k8sworker"
)

// claimKubernetes claims a worker ID as a Lease (--worker-id-source kubernetes): the API
// server and credentials from the pod's service account or KUBECONFIG, the namespace from
// POD_NAMESPACE (else the service account's, else default), the preferred ID from POD_INDEX
// or POD_NAME's ordinal plus --worker-id-min.
func claimKubernetes(ctx context.Context, cfg Config, layout snowflake.Layout, clock snowflake.Clock, log *slog.Logger) (workerClaim, error) {
	rc, err := k8sworker.Config(os.Getenv)
	if err != nil {
		return workerClaim{}, err
	}
	cli, err := k8sworker.NewClient(rc)
	if err != nil {
		return workerClaim{}, err
	}
	lo, hi, err := cfg.workerRange()
	if err != nil {
		return workerClaim{}, err
	}
	d := cfg.KubernetesLeaseDuration
	margin := min(k8sworker.DefaultMargin, d/3)
	o := k8sworker.Options{
		Client:        cli,
		Namespace:     k8sworker.Namespace(os.Getenv),
		Prefix:        cfg.kubernetesLeasePrefix(),
		Identity:      k8sworker.Identity(os.Getenv),
		Preferred:     k8sworker.Preferred(os.Getenv, lo),
		Layout:        layout,
		MinWorker:     lo,
		MaxWorker:     hi,
		LeaseDuration: d,
		Renew:         d / 5,
		Margin:        margin,
		// The longest the generator issues after the last renewal, plus its window (3 s) and 1 s.
		MarkAhead: d - margin + 4*time.Second,
		Logger:    log,
		Clock:     leaseClock(clock),
	}
	w, err := k8sworker.Claim(ctx, o)
	if err != nil {
		return workerClaim{}, err
	}
	// Holders' clocks are not compared: a Lease's renewTime is the holder's clock at a moment
	// this server cannot place on its own.
	holders := func(ctx context.Context, _ int64) ([]int64, []snowflake.Peer, error) {
		ids, err := w.LiveWorkers(ctx)
		return ids, nil, err
	}
	return workerClaim{src: w, lost: w.Lost(), holders: holders}, nil
}
