package segment_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/leaf-go/leaf/segment"
)

// TestFileMarksRemovesLeftovers: Load removes the temporary files that a
// process killed inside a write left beside the marks file, keeps the file
// and every other entry of the directory, and reads the marks as before.
func TestFileMarksRemovesLeftovers(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no flock here: leftovers are kept")
	}
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "segment-marks.json")
	if err := segment.NewFileMarks(path).Store(ctx, "order", 4001); err != nil {
		t.Fatal(err)
	}
	leftovers := []string{".segment-marks.json.tmp-2387461", ".segment-marks.json.tmp-90"}
	others := []string{"leaf.db", "snowflake-0.highwater", ".snowflake-0.highwater.tmp-5", ".segment-marks.json.tmp-x"}
	for _, n := range append(slices.Clone(leftovers), others...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(`{"marks":{"or`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := segment.NewFileMarks(path).Load(ctx)
	if err != nil || m["order"] != 4001 || len(m) != 1 {
		t.Fatalf("Load() = %v, %v, want order=4001", m, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := append(slices.Clone(others), "segment-marks.json")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("after Load the data dir holds %q, want %q", got, want)
	}
}
