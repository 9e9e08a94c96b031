package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// snowflakeCollector turns the Stats of the generator in use into series, plus
// the age of the worker ID source's last heartbeat (lease renewal, ZooKeeper
// upload) when the source reports one. After a re-claim the series are the new
// generator's: its counters start again from 0 (a counter reset to rate()).
type snowflakeCollector struct {
	slot *SnowflakeSlot
	now  func() time.Time

	issued, backEvents, backWait, seqWaits, seqWait, hwStores,
	worker, lastIssued, headroom, heartbeatAge *prometheus.Desc
}

func newSnowflakeCollector(slot *SnowflakeSlot, now func() time.Time) *snowflakeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &snowflakeCollector{
		slot: slot, now: now,
		heartbeatAge: d("leaf_snowflake_source_heartbeat_age_seconds",
			"Seconds since the worker ID source last renewed its lease (sql) or uploaded its node (zookeeper)."),
		issued:     d("leaf_snowflake_ids_issued_total", "Snowflake IDs handed out since start."),
		backEvents: d("leaf_snowflake_clock_backward_events_total", "ID requests that found the clock behind the last issued ID."),
		backWait:   d("leaf_snowflake_clock_backward_wait_seconds_total", "Time spent waiting for the clock to catch up after it moved back."),
		seqWaits:   d("leaf_snowflake_sequence_waits_total", "Waits for the next millisecond after a millisecond's sequence was used up."),
		seqWait:    d("leaf_snowflake_sequence_wait_seconds_total", "Time spent in sequence-exhaustion waits."),
		hwStores:   d("leaf_snowflake_high_water_stores_total", "Stores of the time high-water mark by result (ok, error).", "result"),
		worker:     d("leaf_snowflake_worker_id", "The generator's worker ID; source names where it came from.", "source"),
		lastIssued: d("leaf_snowflake_last_issued_timestamp_seconds", "Unix time of the millisecond of the last issued ID."),
		headroom: d("leaf_snowflake_high_water_headroom_seconds",
			"Stored high-water mark minus now: how long IDs can be issued before the next store must succeed; <= 0 stalls issuing."),
	}
}

// Describe sends the descriptors of every snowflake series.
func (c *snowflakeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.issued, c.backEvents, c.backWait, c.seqWaits, c.seqWait,
		c.hwStores, c.worker, c.lastIssued, c.headroom, c.heartbeatAge} {
		ch <- d
	}
}

// Collect sends one snapshot of the generator's Stats.
func (c *snowflakeCollector) Collect(ch chan<- prometheus.Metric) {
	gen, src := c.slot.Load()
	if gen == nil {
		return
	}
	s := gen.Stats()
	source := "unknown"
	if name := sourceName(src); name != "" {
		source = name
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.issued, float64(s.Issued))
	counter(c.backEvents, float64(s.ClockBackwardEvents))
	counter(c.backWait, s.ClockBackwardWait.Seconds())
	counter(c.seqWaits, float64(s.SequenceWaits))
	counter(c.seqWait, s.SequenceWait.Seconds())
	counter(c.hwStores, float64(s.HighWaterStores), "ok")
	counter(c.hwStores, float64(s.HighWaterFailures), "error")
	gauge(c.worker, float64(s.WorkerID), source)
	if !s.LastIssued.IsZero() {
		gauge(c.lastIssued, float64(s.LastIssued.UnixMilli())/1e3)
	}
	if !s.HighWater.IsZero() {
		gauge(c.headroom, s.HighWater.Sub(c.now()).Seconds())
	}
	if src != nil {
		if t := src.LastHeartbeat(); !t.IsZero() {
			gauge(c.heartbeatAge, c.now().Sub(t).Seconds())
		}
	}
}
