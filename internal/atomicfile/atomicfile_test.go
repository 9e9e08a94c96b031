package atomicfile

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// flockOK: this system has flock, so RemoveTemps can remove leftovers.
var flockOK = renameOpen

func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "target")
	for _, give := range []string{"one\n", "two\n"} {
		if err := Write(path, []byte(give)); err != nil {
			t.Fatalf("Write(%q) = %v", give, err)
		}
		if b, err := os.ReadFile(path); string(b) != give || err != nil {
			t.Fatalf("after Write(%q) the file holds %q, %v", give, b, err)
		}
	}
	if names := dirNames(t, filepath.Dir(path)); !slices.Equal(names, []string{"target"}) {
		t.Errorf("directory holds %q, want only the target", names)
	}
}

func TestIsTemp(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{".marks.json.tmp-0", true},
		{".marks.json.tmp-3985012345", true},
		{".marks.json.tmp-", false},
		{".marks.json.tmp-12x", false},
		{".marks.json.tmp-12.bak", false},
		{"marks.json.tmp-12", false},
		{".marks.json", false},
		{"marks.json", false},
		{".other.json.tmp-12", false},
		{"..marks.json.tmp-12", false},
	}
	for _, tt := range tests {
		if got := isTemp(tt.give, tempPrefix("/d/marks.json")); got != tt.want {
			t.Errorf("isTemp(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

// TestRemoveTemps: leftovers of the target go, the target and every other file stay.
func TestRemoveTemps(t *testing.T) {
	if !flockOK {
		t.Skip("no flock on this system: RemoveTemps removes nothing")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "marks.json")
	if err := Write(path, []byte("real\n")); err != nil {
		t.Fatal(err)
	}
	leftovers := []string{".marks.json.tmp-1234567", ".marks.json.tmp-9"}
	others := []string{
		".marks.json.tmp-", ".marks.json.tmp-12x", ".marks.json.tmp-1.bak", "marks.json.tmp-5",
		".other.json.tmp-5", "leaf.db", ".marks.json",
	}
	for _, n := range append(slices.Clone(leftovers), others...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".marks.json.tmp-77"), 0o755); err != nil { // not a file
		t.Fatal(err)
	}
	removed, err := RemoveTemps(path)
	if err != nil {
		t.Fatalf("RemoveTemps() = %v", err)
	}
	var want []string
	for _, n := range leftovers {
		want = append(want, filepath.Join(dir, n))
	}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("RemoveTemps() removed %q, want %q", removed, want)
	}
	wantNames := append(slices.Clone(others), "marks.json", ".marks.json.tmp-77")
	slices.Sort(wantNames)
	if got := dirNames(t, dir); !slices.Equal(got, wantNames) {
		t.Errorf("directory holds %q, want %q", got, wantNames)
	}
	if b, _ := os.ReadFile(path); string(b) != "real\n" {
		t.Errorf("target holds %q after RemoveTemps, want %q", b, "real\n")
	}
	if removed, err := RemoveTemps(filepath.Join(dir, "missing", "x")); err != nil || len(removed) != 0 {
		t.Errorf("RemoveTemps(in a missing directory) = %q, %v, want nothing, nil", removed, err)
	}
}

// TestRemoveTempsSparesWrites: RemoveTemps running in a loop beside Writes to the same target
// never removes a file a Write is still using, so every Write succeeds.
func TestRemoveTempsSparesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "marks.json")
	stop := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := RemoveTemps(path); err != nil {
				t.Errorf("RemoveTemps() = %v", err)
				return
			}
		}
	})
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			for i := range 50 {
				if err := Write(path, fmt.Appendf(nil, "%d-%d\n", w, i)); err != nil {
					t.Errorf("Write #%d of writer %d = %v", i, w, err)
					return
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	sweeps.Wait()
	if names := dirNames(t, filepath.Dir(path)); !slices.Equal(names, []string{"marks.json"}) {
		t.Errorf("directory holds %q, want only the target", names)
	}
}

// TestRemoveTempsAfterKill: a process holding a temporary file (as a Write does) keeps it from
// RemoveTemps; once it is killed with SIGKILL, the file is a leftover and goes.
func TestRemoveTempsAfterKill(t *testing.T) {
	if !flockOK {
		t.Skip("no flock on this system: RemoveTemps removes nothing")
	}
	path := filepath.Join(t.TempDir(), "marks.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldTemp$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper wrote %q, %v", line, err)
	}
	tmp := strings.TrimSpace(line)
	if removed, err := RemoveTemps(path); err != nil || len(removed) != 0 {
		t.Fatalf("RemoveTemps() while the helper holds %s = %q, %v, want nothing removed", tmp, removed, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	removed, err := RemoveTemps(path)
	if err != nil || !slices.Equal(removed, []string{tmp}) {
		t.Fatalf("RemoveTemps() after the kill = %q, %v, want [%s]", removed, err, tmp)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("Stat(%s) = %v, want it gone", tmp, err)
	}
}

// TestHelperHoldTemp is the child process of TestRemoveTempsAfterKill: it creates and locks a
// temporary file as Write does, prints its name and waits to be killed.
func TestHelperHoldTemp(t *testing.T) {
	path := os.Getenv("ATOMICFILE_HOLD")
	if path == "" {
		t.Skip("helper process for TestRemoveTempsAfterKill")
	}
	tmp, err := createLocked(filepath.Dir(path), tempPrefix(path))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(tmp.Name())
	time.Sleep(time.Minute)
}

// dirNames lists dir's entries, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}
