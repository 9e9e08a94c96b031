// Package metrictest reads Prometheus series back in tests: the helpers the api tests of the
// root module and of the test module (internal/testing/api) share. It is imported only from
// tests.
package metrictest

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TagsOf returns, per metric family of reg, the non-empty biz_tag label values it has,
// sorted. It fails the test when reg cannot be gathered.
func TagsOf(t *testing.T, reg prometheus.Gatherer) map[string][]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "biz_tag" && l.GetValue() != "" && !slices.Contains(out[mf.GetName()], l.GetValue()) {
					out[mf.GetName()] = append(out[mf.GetName()], l.GetValue())
				}
			}
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// Value returns the value of the series of name with exactly labels (name, value pairs; an
// empty value means the label must be absent or empty), and whether it exists: a counter's or
// gauge's value, a histogram's sample count. It fails the test when reg cannot be gathered.
func Value(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !HasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// HasLabels reports whether m's non-empty labels are exactly pairs (name, value pairs; a pair
// with an empty value requires the label to be absent or empty).
func HasLabels(m *dto.Metric, pairs []string) bool {
	want := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		want[pairs[i]] = pairs[i+1]
	}
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		if l.GetValue() != "" {
			got[l.GetName()] = l.GetValue()
		}
	}
	empty := 0
	for k, v := range want {
		if v == "" {
			empty++
			if _, ok := got[k]; ok {
				return false
			}
			continue
		}
		if got[k] != v {
			return false
		}
	}
	return len(got) == len(want)-empty
}
