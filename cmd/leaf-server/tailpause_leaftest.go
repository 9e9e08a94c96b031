//go:build leaftest

package main

import (
	"log/slog"
	"os"
	"time"
)

// tailPause, in builds with -tags leaftest only, returns the hook that
// segment.Generator.ReturnTails calls between lowering a tag's mark and the
// compare-and-set on max_id, when LEAF_TEST_TAIL_PAUSE names a file: it
// writes the tag into that file and then waits until the file is removed,
// so that the fault tests can kill -9 the process exactly between the two
// steps, or let other servers allocate meanwhile. Without the variable it
// returns nil.
func tailPause(log *slog.Logger) func(tag string) {
	path := os.Getenv("LEAF_TEST_TAIL_PAUSE")
	if path == "" {
		return nil
	}
	return func(tag string) {
		if err := os.WriteFile(path, []byte(tag), 0o644); err != nil {
			log.Warn("tail pause file not written", "err", err)
			return
		}
		log.Info("tail return paused between the two steps", "biz_tag", tag, "file", path)
		for {
			if _, err := os.Stat(path); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
