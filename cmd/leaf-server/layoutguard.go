package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/leaf-go/leaf/internal/atomicfile"
	"github.com/leaf-go/leaf/snowflake"
)

// layoutFile names the file in the data dir that records the snowflake
// layout of the last run, so that a restart with another --epoch-ms or other
// bit widths is checked against the IDs already issued.
const layoutFile = "snowflake-layout.json"

// layoutRecord is the content of layoutFile.
type layoutRecord struct {
	EpochMillis  int64 `json:"epoch_ms"`
	TimeBits     int   `json:"time_bits"`
	WorkerBits   int   `json:"worker_bits"`
	SequenceBits int   `json:"sequence_bits"`
}

func recordOf(l snowflake.Layout) layoutRecord {
	return layoutRecord{l.EpochMillis(), l.TimeBits, l.WorkerBits, l.SequenceBits}
}

func (r layoutRecord) layout() snowflake.Layout {
	return snowflake.Layout{Epoch: time.UnixMilli(r.EpochMillis), TimeBits: r.TimeBits, WorkerBits: r.WorkerBits, SequenceBits: r.SequenceBits}
}

// checkLayout refuses a snowflake layout change on the data dir dir that
// could repeat IDs, and records l for the next start. The time high-water
// mark is kept in wall-clock milliseconds, so it alone does not see that
// moving the epoch later (or narrowing the worker or sequence field) makes
// new IDs smaller than old ones. The rule is [snowflake.CheckLayoutChange]
// (floor: the high-water mark the generator loaded); a refusal names both
// layouts and leaves the record as it was. A missing record (first start) is
// written; a damaged one is an error (delete it only knowing that the layout
// did not change).
func checkLayout(dir string, l snowflake.Layout, floor, now time.Time) error {
	path := filepath.Join(dir, layoutFile)
	rec := recordOf(l)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("snowflake layout record: %w", err)
	default:
		var old layoutRecord
		if err := json.Unmarshal(data, &old); err != nil {
			return fmt.Errorf("snowflake layout record %s is damaged (%v): delete it only if the layout did not change since the last run", path, err)
		}
		if old == rec {
			return nil
		}
		err := snowflake.CheckLayoutChange(old.layout(), l, floor, now)
		if errors.Is(err, snowflake.ErrInvalidLayout) {
			return fmt.Errorf("snowflake layout record %s is damaged (%w): delete it only if the layout did not change since the last run", path, err)
		}
		if err != nil {
			return fmt.Errorf("snowflake layout changed since the last run on %s (%s: epoch %d ms, bits %d/%d/%d; now epoch %d ms, bits %d/%d/%d): "+
				"%w. Keep the old layout, or move the epoch earlier rather than later",
				dir, layoutFile, old.EpochMillis, old.TimeBits, old.WorkerBits, old.SequenceBits,
				rec.EpochMillis, rec.TimeBits, rec.WorkerBits, rec.SequenceBits, err)
		}
	}
	data, err = json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data)
}
