package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/store"
)

// retryCounter is the part of [store.Store] the collector reads: retries
// since Open per [store.RetryCauses] name, nil for a store that never
// re-runs (sqlite).
type retryCounter interface {
	RetryCounts() map[string]uint64
}

// storeRetryCollector turns the store's RetryCounts into
// leaf_store_retries_total{cause}, one series per [store.RetryCauses] name
// (zero for a cause the store never meets), so the label set is fixed.
type storeRetryCollector struct {
	rc      retryCounter
	retries *prometheus.Desc
}

func newStoreRetryCollector(rc retryCounter) *storeRetryCollector {
	return &storeRetryCollector{
		rc: rc,
		retries: prometheus.NewDesc("leaf_store_retries_total",
			"Transactions (or statements) the database refused and the store re-ran whole, by cause: "+
				"deadlock, lock_wait_timeout, write_conflict, schema_changed, node_not_ready, ambiguous_commit, connection.",
			[]string{"cause"}, nil),
	}
}

// Describe sends the descriptor of leaf_store_retries_total.
func (c *storeRetryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.retries }

// Collect sends one snapshot of the store's RetryCounts.
func (c *storeRetryCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.rc.RetryCounts()
	if counts == nil { // a store that keeps none (sqlite), or not open yet
		return
	}
	for _, cause := range store.RetryCauses() {
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(counts[cause]), cause)
	}
}
