// Package bench is leaf-go's benchmark harness. It has no library code: the
// harness is the test TestHarness, which `make bench` runs as
//
//	cd internal/testing && go test -v -count=1 -timeout 15m -run '^TestHarness$' ./bench/ -args -harness -out ../../../BENCHMARKS.md
//
// It builds the real leaf-server and leafctl binaries, runs everything on
// loopback against the local PostgreSQL and MariaDB (LEAF_TEST_POSTGRES_DSN,
// LEAF_TEST_MYSQL_DSN, as the other tests), and measures every figure next to
// a baseline from the same run: the Go benchmarks of segment, snowflake and
// api (each next to its baseline in its own package; the other snowflake
// libraries in internal/testing/snowflake, run in the same go test as
// snowflake's own benchmarks), HTTP single-ID against a
// bare chi handler in a process of its own, batch against single-ID, the
// databases' own counters a user would otherwise call, a segment switch under
// a slow database, and how memory, first use of many tags, database writes
// and throughput grow (about 5 minutes on 2 cores, well under 10). It
// prints each section as it finishes and writes them between the harness
// markers of BENCHMARKS.md, keeping the hand-written text around them.
//
// Without -harness the test skips, so `go test ./...` stays fast. -quick
// shortens every run (a smoke test of the harness, not figures to publish);
// -only segment,http,… runs some sections.
// Speed is never asserted: the numbers live in the report.
package bench
