//go:build leaftest

package main

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

// testClock, in builds with -tags leaftest only, returns a clock that is c
// (nil: the system clock) plus an offset in milliseconds read from the file
// named by LEAF_TEST_CLOCK_FILE, re-read at most every 2 ms. The fault
// campaign writes the file atomically to step the snowflake clock of a real
// process back and forth. Without the variable it returns c unchanged.
func testClock(c snowflake.Clock) snowflake.Clock {
	path := os.Getenv("LEAF_TEST_CLOCK_FILE")
	if path == "" {
		return c
	}
	if c == nil {
		c = snowflake.NewAnchoredClock() // the generator's default
	}
	fc := &fileClock{base: c, path: path}
	fc.offset() // a start-up offset applies to the first reading
	return fc
}

// fileClock is base shifted by the offset in path.
type fileClock struct {
	base snowflake.Clock
	path string

	mu   sync.Mutex // guards read and off
	read time.Time  // when path was last read (monotonic)
	off  time.Duration
}

func (f *fileClock) offset() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.read.IsZero() && time.Since(f.read) < 2*time.Millisecond {
		return f.off
	}
	f.read = time.Now()
	if b, err := os.ReadFile(f.path); err == nil {
		if ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			f.off = time.Duration(ms) * time.Millisecond
		}
	}
	return f.off
}

// Now is base's time plus the offset (wall and monotonic readings alike).
func (f *fileClock) Now() time.Time { return f.base.Now().Add(f.offset()) }

// Sleep is base's Sleep: offsets shift readings, not durations.
func (f *fileClock) Sleep(d time.Duration) { f.base.Sleep(d) }
