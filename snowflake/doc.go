// Package snowflake issues 64-bit, time-ordered IDs the way Twitter's snowflake and Meituan
// Leaf's SnowflakeIDGenImpl do, bit for bit compatible with both under the default layout.
//
// # Layout
//
// DefaultLayout (Leaf's and Twitter's), most significant bit first:
//
//	 63  62                                      22 21          12 11          0
//	+---+------------------------------------------+--------------+-------------+
//	| 0 |  time: ms since epoch 1288834974657      |  worker ID   |  sequence   |
//	|   |  41 bits, 2^41 ms ≈ 69.7 years           |  10 bits     |  12 bits    |
//	|   |  2010-11-04T01:42:54.657Z ..             |  0..1023     |  0..4095    |
//	|   |  2080-07-10T17:30:30.208Z                |              |  per ms     |
//	+---+------------------------------------------+--------------+-------------+
//	sign                                           | dc 5 | mach 5|
//	                                               Twitter's view of the worker bits
//
//	id = (ms - epoch) << 22 | worker << 12 | sequence
//	   = (ms - epoch) << 22 | datacenter << 17 | machine << 12 | sequence   (Twitter)
//
// One worker issues at most 4096 IDs per millisecond (about 4 million per second); Leaf starts
// each millisecond's sequence at a random value below 100, which this package does by default
// too. Epoch and widths are configurable through Layout; Layout.Validate checks them and
// Layout.End says when a layout runs out. Compose and Decompose are pure functions of their
// arguments, for the decode/encode API and for tools.
//
// # Generator
//
// Generator.Next issues IDs for one worker ID. It follows Leaf's rules for clock steps back (up
// to 5 ms: wait twice the offset, then error -1; more: error -3 at once) but does not hold its
// lock while it waits, bounds the wait for the next millisecond, and persists a time high-water
// mark (HighWater, kept by the worker ID's Source) so that a restarted
// generator issues nothing until its clock has passed every millisecond an earlier run may have
// used. Code maps errors to Leaf's result codes. Its default clock, AnchoredClock, reads the
// wall clock as an anchor plus monotonic time and compares with the wall clock every millisecond,
// so clock steps reach those rules within a millisecond.
//
// # Worker IDs
//
// The worker ID comes from outside the generator, from a [Source] given as Settings.Source.
// A Source hands the generator its worker ID, keeps its time high-water mark (HighWater) and
// says until when it may back IDs (Lease); leaf-server's probes read its readiness, heartbeat
// and details. Three sources exist (docs/contract.md §3; docs/architecture.md maps them to
// files):
//   - [StaticSource]: a configured worker ID, checked by New with Layout.CheckWorker (see
//     Settings.WorkerID for the risk), the mark in a local file (FileHighWater);
//   - package snowflake/zkworker: Leaf's ZooKeeper layout, shared with Java Leaf nodes; the
//     mark in the node's timestamp plus Leaf's local cache file;
//   - package snowflake/sqllease: the lowest free row of a lease table in the segment
//     database, renewed every 3 s with a TTL measured by the database's clock; the mark in the
//     row. Its Expiry (last successful renewal + TTL − margin) stops Next as soon as the lease
//     may have expired.
//
// Settings.WorkerID, HighWater and Lease remain for callers that wire the three parts
// themselves. CheckLayoutChange says whether a new Layout may follow an old one on the same
// worker IDs without repeating IDs.
//
// This package imports only the standard library (and the module's internal/atomicfile).
package snowflake
