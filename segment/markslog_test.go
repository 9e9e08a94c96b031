package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func loadLog(t *testing.T, path string) map[string]int64 {
	t.Helper()
	m, err := NewLogMarks(path, "", nil).Load(context.Background())
	if err != nil {
		t.Fatalf("LogMarks(%s).Load: %v", path, err)
	}
	return m
}

// TestLogMarks: marks survive a reopen, are never lowered, keep all 64 bits,
// and a Store appends one record (the file grows by a record, not by the
// number of tags).
func TestLogMarks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "segment-marks.log")
	f := NewLogMarks(path, "", nil)
	if m, err := f.Load(ctx); err != nil || len(m) != 0 {
		t.Fatalf("Load of a missing log = %v, %v, want empty, nil", m, err)
	}
	big := int64(math.MaxInt64 - 1)
	for _, give := range []struct {
		tag  string
		mark int64
	}{{"a", 100}, {"b", big}, {"a", 50}, {"a", 200}, {"订单", 7}} {
		if err := f.Store(ctx, give.tag, give.mark); err != nil {
			t.Fatalf("Store(%q, %d): %v", give.tag, give.mark, err)
		}
	}
	m := loadLog(t, path)
	if m["a"] != 200 || m["b"] != big || m["订单"] != 7 || len(m) != 3 {
		t.Fatalf("Load = %v, want a=200 (never lowered), b=%d, 订单=7", m, big)
	}
	// 4 records: the Store of a=50 wrote nothing.
	want := int64(len(marksLogHeader)) + 4*(recHead+8) + 1 + 1 + 1 + int64(len("订单"))
	if st, _ := os.Stat(path); st.Size() != want {
		t.Errorf("log size = %d, want %d (header and 4 records)", st.Size(), want)
	}
	for _, bad := range []map[string]int64{{"": 5}, {"x": 0}, {strings.Repeat("x", 129): 5}, {"\xff": 5}} {
		bad["good"] = 9
		if err := f.StoreAll(ctx, bad); err == nil {
			t.Errorf("StoreAll(%v) = nil, want an error", bad)
		}
	}
	if m := loadLog(t, path); m["good"] != 9 || len(m) != 4 {
		t.Errorf("after StoreAll with bad entries the log holds %v, want the good mark stored, nothing else", m)
	}
}

// TestLogMarksGroupCommit: Stores that arrive while a write is under way are
// written together, and every mark is durable when its Store returns.
func TestLogMarksGroupCommit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "segment-marks.log")
	f := NewLogMarks(path, "", nil)
	if _, err := f.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	const n = 64
	f.mu.Lock()
	f.writing = true
	f.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tag := fmt.Sprintf("tag-%d", i)
			if err := f.Store(context.Background(), tag, int64(1000+i)); err != nil {
				errs <- err
				return
			}
			m, err := ReadMarksLog(path)
			if err != nil || m[tag] < int64(1000+i) {
				errs <- fmt.Errorf("after Store(%q) the log holds %d (%v), want %d", tag, m[tag], err, 1000+i)
			}
		}()
	}
	for {
		f.mu.Lock()
		staged := f.seq
		f.mu.Unlock()
		if staged == n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	f.mu.Lock()
	f.writing = false
	f.cond.Broadcast()
	f.mu.Unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if f.writes != 1 {
		t.Errorf("%d staged Stores took %d writes, want 1", n, f.writes)
	}
	if m := loadLog(t, path); len(m) != n {
		t.Fatalf("Load after %d Stores = %d marks", n, len(m))
	}
}

// TestLogMarksCompaction: past CompactBytes and twice the snapshot size the
// log is rewritten as one record per tag, and keeps every mark.
func TestLogMarksCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "segment-marks.log")
	f := NewLogMarks(path, "", nil)
	f.CompactBytes = 4096
	for i := range 2000 {
		if err := f.Store(ctx, fmt.Sprintf("tag-%d", i%10), int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if f.compactions == 0 {
		t.Fatal("2,000 Stores of 10 tags past CompactBytes 4096: no compaction")
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() > 4096+recHead+8+10 {
		t.Fatalf("log after compactions: %v, %v, want at most CompactBytes and one record", st, err)
	}
	m := loadLog(t, path)
	for i := range 10 {
		if want := int64(1990 + i + 1); m[fmt.Sprintf("tag-%d", i)] != want {
			t.Errorf("mark of tag-%d = %d, want %d", i, m[fmt.Sprintf("tag-%d", i)], want)
		}
	}
}

// TestLogMarksTornTail: a log cut anywhere inside its last record (a crash
// during a write) or followed by zeros loads the whole records before it, and
// the tail is cut from the file so the next append follows a whole record.
func TestLogMarksTornTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.log")
	f := NewLogMarks(src, "", nil)
	if err := f.StoreAll(ctx, map[string]int64{"a": 10, "b": 20}); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(src)
	if err := f.Store(ctx, "c", 30); err != nil {
		t.Fatal(err)
	}
	full, _ := os.ReadFile(src)
	tails := map[string][]byte{"zeros": append(append([]byte{}, full...), make([]byte, 100)...)}
	for cut := len(whole); cut < len(full); cut++ {
		tails[fmt.Sprintf("cut at %d", cut)] = full[:cut]
	}
	// A flipped bit in the last record is a torn write too: nothing follows.
	flip := append([]byte{}, full...)
	flip[len(flip)-1] ^= 1
	tails["last record bad"] = flip
	for name, b := range tails {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		g := NewLogMarks(p, "", nil)
		m, err := g.Load(ctx)
		if err != nil {
			t.Errorf("%s: Load = %v, want the whole records", name, err)
			continue
		}
		wantC := int64(0)
		if name == "zeros" {
			wantC = 30
		}
		if m["a"] != 10 || m["b"] != 20 || m["c"] != wantC {
			t.Errorf("%s: Load = %v, want a=10 b=20 c=%d", name, m, wantC)
		}
		if err := g.Store(ctx, "d", 40); err != nil {
			t.Fatal(err)
		}
		if m := loadLog(t, p); m["d"] != 40 || m["a"] != 10 {
			t.Errorf("%s: after the cut and a Store, Load = %v, want a=10 d=40", name, m)
		}
	}
}

// TestLogMarksDamaged: a damaged record with whole records after it, or a
// bad header, stops Load with ErrMarksDamaged and what to do; the file is
// left as it was.
func TestLogMarksDamaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.log")
	f := NewLogMarks(src, "", nil)
	for i, tag := range []string{"a", "b", "c"} {
		if err := f.Store(ctx, tag, int64(10*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	full, _ := os.ReadFile(src)
	mid := append([]byte{}, full...)
	mid[len(marksLogHeader)+recHead+9] ^= 1 // in record b... of the first record's payload
	header := append([]byte{}, full...)
	header[0] = 'X'
	for name, b := range map[string][]byte{"middle": mid, "header": header, "empty": {}} {
		p := filepath.Join(dir, name+".log")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := NewLogMarks(p, "", nil).Load(ctx)
		if !errors.Is(err, ErrMarksDamaged) || !strings.Contains(err.Error(), "move the file away") {
			t.Errorf("%s: Load = %v, want ErrMarksDamaged saying what to do", name, err)
		}
		if after, _ := os.ReadFile(p); string(after) != string(b) {
			t.Errorf("%s: Load changed the damaged file", name)
		}
	}
}

// TestLogMarksImport: the JSON file of FileMarks is merged into the log
// (marks only rise), renamed to .imported, and not read again.
func TestLogMarksImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "segment-marks.json")
	logPath := filepath.Join(dir, "segment-marks.log")
	if err := NewFileMarks(jsonPath).StoreAll(ctx, map[string]int64{"a": 100, "b": 200}); err != nil {
		t.Fatal(err)
	}
	// A log that already has b higher and c (a crash after the import wrote
	// the log but before the rename): merged, nothing lowered.
	pre := NewLogMarks(logPath, "", nil)
	if err := pre.StoreAll(ctx, map[string]int64{"b": 300, "c": 5}); err != nil {
		t.Fatal(err)
	}
	m, err := NewLogMarks(logPath, jsonPath, nil).Load(ctx)
	if err != nil || m["a"] != 100 || m["b"] != 300 || m["c"] != 5 {
		t.Fatalf("Load with import = %v, %v, want a=100 b=300 c=5", m, err)
	}
	if _, err := os.Stat(jsonPath); err == nil {
		t.Error("JSON file still in place after the import")
	}
	if _, err := os.Stat(jsonPath + ".imported"); err != nil {
		t.Errorf("JSON file not renamed to .imported: %v", err)
	}
	if m := loadLog(t, logPath); m["a"] != 100 || len(m) != 3 {
		t.Errorf("log after import = %v, want a=100 and 3 tags", m)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewLogMarks(filepath.Join(dir, "x.log"), bad, nil).Load(ctx); err == nil {
		t.Error("Load importing a malformed JSON file = nil error, want one")
	}
}

// TestLogMarksWriteErrorCut: a write that fails midway (here: the file
// replaced by a read-only descriptor, as a full disk refuses writes) is an
// error for the whole group, and the log stays whole: the next successful
// write follows the last durable record.
func TestLogMarksWriteErrorCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "segment-marks.log")
	f := NewLogMarks(path, "", nil)
	if err := f.Store(ctx, "a", 10); err != nil {
		t.Fatal(err)
	}
	good := f.file
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.file = ro
	f.mu.Unlock()
	if err := f.Store(ctx, "b", 20); err == nil {
		t.Fatal("Store on a failing file = nil, want the write's error")
	}
	f.mu.Lock()
	f.file = good
	f.opened = true
	f.mu.Unlock()
	_ = ro.Close()
	if err := f.Store(ctx, "c", 30); err != nil {
		t.Fatal(err)
	}
	// b was staged again and goes out with c.
	if m := loadLog(t, path); m["a"] != 10 || m["b"] != 20 || m["c"] != 30 {
		t.Errorf("log = %v, want a=10 b=20 c=30", m)
	}
}

// TestLogMarksLower: a lowering record sets the mark below the stored one
// and keeps the return's seq; a later Store raises it again; both survive a
// reopen and a compaction; a torn lowering record at the end is cut like any
// torn record (issue 22 item 2).
func TestLogMarksLower(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "segment-marks.log")
	f := NewLogMarks(path, "", nil)
	f.CompactBytes = 1 // compact whenever the log doubles
	for _, step := range []func() error{
		func() error { return f.Store(ctx, "a", 500) },
		func() error { return f.Store(ctx, "b", 70) },
		func() error { return f.Lower(ctx, "a", 120, 3) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, wantA, wantSeq int64) {
		t.Helper()
		g := NewLogMarks(path, "", nil)
		m, err := g.Load(ctx)
		if err != nil {
			t.Fatalf("%s: Load: %v", when, err)
		}
		rets, err := g.Returns(ctx)
		if err != nil || m["a"] != wantA || m["b"] != 70 || rets["a"] != wantSeq || rets["b"] != 0 {
			t.Fatalf("%s: marks %v returns %v (%v), want a=%d b=70, return of a %d", when, m, rets, err, wantA, wantSeq)
		}
	}
	check("after Lower", 120, 3)
	if err := f.Store(ctx, "a", 100); err != nil { // below the lowered mark: nothing
		t.Fatal(err)
	}
	check("after a Store below", 120, 3)
	if err := f.Store(ctx, "a", 300); err != nil {
		t.Fatal(err)
	}
	check("after a Store above", 300, 3)
	for i := range 20 { // force compactions
		if err := f.Store(ctx, fmt.Sprintf("t%d", i), 5); err != nil {
			t.Fatal(err)
		}
	}
	if f.compactions == 0 {
		t.Fatal("no compaction happened")
	}
	check("after compaction", 300, 3)
	if err := f.Lower(ctx, "a", 0, 4); err == nil {
		t.Error("Lower to 0 = nil, want an error")
	}
	if err := f.Lower(ctx, "a", 10, 0); err == nil {
		t.Error("Lower with seq 0 = nil, want an error")
	}
	// A lowering record torn by a crash is cut: the mark it would have
	// lowered stays (the refusal side).
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rec := appendLowering(nil, "a", 50, 4)
	file, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write(rec[:len(rec)-2]); err != nil {
		t.Fatal(err)
	}
	file.Close()
	check("after a torn lowering", 300, 3)
}
