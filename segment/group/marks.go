package group

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"sync"

	"github.com/leaf-go/leaf/internal/atomicfile"
	"github.com/leaf-go/leaf/segment"
)

// periodMarks holds, per grouped tag, the key of the latest period this
// server issued an ID of (its time high-water mark), in one small JSON file
// of the data directory:
//
//	{"periods":{"order":"20261202"}}
//
// Every raise rewrites the file atomically (internal/atomicfile) before it
// returns, so a crash leaves the old or the new file, and a period's first
// ID is handed out only after its mark is durable. One write per tag per
// period. Keys of one tag compare as strings (same group, same length).
type periodMarks struct {
	path string // "" keeps the marks in memory only

	mu    sync.Mutex // guards marks and the file
	marks map[string]string
}

// periodsFile is the JSON layout of the file.
type periodsFile struct {
	Periods map[string]string `json:"periods"`
}

// loadPeriodMarks reads path; a missing file means no marks, an unreadable
// or malformed one is an error.
func loadPeriodMarks(path string) (*periodMarks, error) {
	pm := &periodMarks{path: path, marks: map[string]string{}}
	if path == "" {
		return pm, nil
	}
	_, _ = atomicfile.RemoveTemps(path)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return pm, nil
	}
	if err != nil {
		return nil, fmt.Errorf("segment: read period high-water marks: %w", err)
	}
	var f periodsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("segment: period high-water marks file %s: %w", path, err)
	}
	for tag, key := range f.Periods {
		if _, _, ok := segment.SplitRowTag("x:" + key); !ok {
			return nil, fmt.Errorf("segment: period high-water marks file %s: period of %q is %q, not 4, 6 or 8 digits", path, tag, key)
		}
		pm.marks[tag] = key
	}
	return pm, nil
}

// get returns the mark of tag ("" for none).
func (pm *periodMarks) get(tag string) string {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	return pm.marks[tag]
}

// raise makes key the mark of tag when it is later, durable before it
// returns nil. An error leaves the mark unraised.
func (pm *periodMarks) raise(tag, key string) error {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.marks[tag] >= key {
		return nil
	}
	if pm.path != "" {
		next := maps.Clone(pm.marks)
		next[tag] = key
		b, err := json.Marshal(periodsFile{Periods: next})
		if err != nil {
			return err
		}
		if err := atomicfile.Write(pm.path, b); err != nil {
			return err
		}
	}
	pm.marks[tag] = key
	return nil
}
