//go:build !leaftest

package main

import "github.com/leaf-go/leaf/snowflake"

// testClock returns c: production builds have no clock injection. The
// leaftest build (testclock_leaftest.go) can offset the clock from a file,
// for the fault campaign's clock-step scenarios.
func testClock(c snowflake.Clock) snowflake.Clock { return c }
