package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WorkerRange is what a lease worker-ID source (sql, etcd, kubernetes) last
// saw of its range --worker-id-min..--worker-id-max: how many worker IDs of
// it have a live holder, and the holders' clocks. leaf-server rescans it
// about every 15 s; /metrics shows the last scan.
type WorkerRange struct {
	// Min and Max bound the range, inclusive: Max−Min+1 worker IDs.
	Min, Max int64
	// Held is how many worker IDs of the range had a live holder (this
	// server included), 0..Max−Min+1.
	Held int64
	// Peers are the other live holders' clock reports; PeerOffset is their
	// mean offset from this server's clock (positive: the peers are ahead),
	// as snowflake.CheckPeerClock computes it at start. Without peers the
	// offset series is left out.
	Peers      int
	PeerOffset time.Duration
}

// snowflakeCollector turns the Stats of the generator in use into series, plus
// the age of the worker ID source's last heartbeat (lease renewal, ZooKeeper
// upload) when the source reports one, whether the source can back IDs
// (Ready, which a re-claim in progress reports too), and the last scan of a
// lease source's range. After a re-claim the series are the new generator's:
// its counters start again from 0 (a counter reset to rate()).
type snowflakeCollector struct {
	slot        *SnowflakeSlot
	now         func() time.Time
	workerRange func() (r WorkerRange, ok bool) // may be nil: no range

	issued, backEvents, backWait, seqWaits, seqWait, hwStores,
	worker, lastIssued, headroom, heartbeatAge,
	sourceReady, behindMark, idsFree, idsRange, peerOffset *prometheus.Desc
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
		sourceReady: d("leaf_snowflake_source_ready",
			"1 while the worker ID source can back new IDs; 0 when its lease is lost, lapsed or in an identity conflict (/readyz says why)."),
		behindMark: d("leaf_snowflake_clock_behind_mark_seconds",
			"How far the clock is behind the highest of the loaded high-water mark and the last issued millisecond; > 0 means no snowflake IDs until it catches up."),
		idsFree: d("leaf_snowflake_worker_ids_free",
			"Worker IDs of --worker-id-min..--worker-id-max without a live holder at the last scan of a lease source (sql, etcd, kubernetes); for zookeeper, of the layout's whole worker ID space without a /forever node (Leaf's layout keeps a number with its address)."),
		idsRange: d("leaf_snowflake_worker_ids_range",
			"Worker IDs in --worker-id-min..--worker-id-max of a lease source (zookeeper: the layout's whole worker ID space)."),
		peerOffset: d("leaf_snowflake_peer_clock_offset_seconds",
			"Mean offset of the live peers' reported clocks from this server's clock at the last scan (positive: peers ahead); compare with --max-peer-clock-skew."),
	}
}

// Describe sends the descriptors of every snowflake series.
func (c *snowflakeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.issued, c.backEvents, c.backWait, c.seqWaits, c.seqWait,
		c.hwStores, c.worker, c.lastIssued, c.headroom, c.heartbeatAge,
		c.sourceReady, c.behindMark, c.idsFree, c.idsRange, c.peerOffset} {
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
	ready := 1.0
	if src != nil && src.Ready() != nil {
		ready = 0
	}
	gauge(c.sourceReady, ready)
	mark := s.Floor
	if s.LastIssued.After(mark) {
		mark = s.LastIssued
	}
	behind := 0.0
	if now := c.now(); !mark.IsZero() && mark.After(now) {
		behind = mark.Sub(now).Seconds()
	}
	gauge(c.behindMark, behind)
	if c.workerRange != nil {
		if r, ok := c.workerRange(); ok {
			size := r.Max - r.Min + 1
			gauge(c.idsRange, float64(size))
			gauge(c.idsFree, float64(max(size-r.Held, 0)))
			if r.Peers > 0 {
				gauge(c.peerOffset, r.PeerOffset.Seconds())
			}
		}
	}
}
