// Package faults is leaf-go's fault campaign: tests only (`make faults`).
//
// Every scenario runs real leaf-server processes on loopback against the real
// PostgreSQL, MariaDB and ZooKeeper of the test machine, breaks something for
// real (a TCP fault proxy that cuts or slows the database or ZooKeeper,
// a private ZooKeeper killed, restarted or wiped (internal/zktest.Server),
// kill -9, SIGTERM cut short, two servers sharing one database or one worker
// ID, hostile requests, slow clients) and checks what a caller of an ID
// service cares about: every ID answered with 200 is unique, every segment ID
// lies inside a range that a committed UPDATE of leaf_alloc reserved (an
// audit trigger records [old max_id, new max_id) of every committed UPDATE),
// every failure is a non-200 answer with a Leaf code within the configured
// bound, and the service recovers by itself when the fault ends.
//
// Each scenario logs one summary line per size of fault (prefix "FAULTS");
// with LEAF_FAULTS_REPORT=<file> the whole run is also written there as a
// Markdown table, the one pasted into RELIABILITY.md.
package faults
