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
// mark (HighWater, e.g. FileHighWater or the ZooKeeper node of zkworker) so that a restarted
// generator issues nothing until its clock has passed every millisecond an earlier run may have
// used. Code maps errors to Leaf's result codes. Its default clock, AnchoredClock, reads the
// wall clock as an anchor plus monotonic time and compares with the wall clock every millisecond,
// so clock steps reach those rules within a millisecond.
//
// # Worker IDs
//
// The worker ID comes from outside the generator (Settings.WorkerID):
//   - static configuration, checked with Layout.CheckWorker (see Settings.WorkerID for the risk);
//   - package snowflake/zkworker: Leaf's ZooKeeper layout, shared with Java Leaf nodes; its
//     Worker is also the HighWater (node timestamp plus local cache file);
//   - a SQL lease table (not written yet; it needs package store). It will hand the generator
//     three things through Settings: WorkerID (the lowest free row it claimed), HighWater (Load
//     and Store of the time mark kept in the lease row, using the database's clock for the
//     lease itself), and Lease (Expiry() = last successful renewal + TTL − margin, read from an
//     atomic), so that Next stops issuing as soon as the lease may have expired. Its owner
//     renews every 3 s in a goroutine stopped by Close, like zkworker.Worker.
//
// This package imports only the standard library (and the module's internal/atomicfile).
package snowflake
