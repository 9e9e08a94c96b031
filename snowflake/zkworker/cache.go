package zkworker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leaf-go/leaf/internal/atomicfile"
)

// fromCache takes the worker ID from the cache file and checks the clock against its mark.
func (w *Worker) fromCache(ctx context.Context) error {
	id, mark, err := readCache(w.cachePath)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist; start once with ZooKeeper reachable", ErrNoCache, w.cachePath)
	}
	if err != nil {
		return err
	}
	if err := w.checkRange(id, w.cachePath); err != nil {
		return err
	}
	if mark.IsZero() {
		w.log.Warn("zkworker: the cache file holds no timestamp (written by Leaf?); the clock cannot be checked", "cache", w.cachePath)
	}
	if err := w.waitForClock(ctx, mark, w.cachePath); err != nil {
		return err
	}
	w.id, w.source, w.loaded, w.node = id, SourceCache, mark, ""
	w.uploaded.Store(0)
	if !mark.IsZero() {
		w.mark.Store(mark.UnixMilli())
	}
	return nil
}

// readCache parses the properties file: workerID=<n> and optionally timestamp=<ms>.
func readCache(p string) (id int64, mark time.Time, err error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, time.Time{}, err
	}
	props := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	id, err = strconv.ParseInt(props["workerID"], 10, 64)
	if err != nil || id < 0 {
		return 0, time.Time{}, fmt.Errorf("%w: %s: workerID=%q", ErrNodeData, p, props["workerID"])
	}
	if ts, ok := props["timestamp"]; ok {
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ms < 0 {
			return 0, time.Time{}, fmt.Errorf("%w: %s: timestamp=%q", ErrNodeData, p, ts)
		}
		mark = time.UnixMilli(ms)
	}
	return id, mark, nil
}

// writeCache writes Leaf's cache file plus the mark.
func (w *Worker) writeCache(markMillis int64) error {
	content := fmt.Sprintf("workerID=%d\ntimestamp=%d\n", w.id, markMillis)
	return atomicfile.Write(w.cachePath, []byte(content))
}
