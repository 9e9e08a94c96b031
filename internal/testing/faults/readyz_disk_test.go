package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestReadyzFullDisk is issue 20 item 7 on a real full filesystem: the data
// directory (segment-marks.log) on a small tmpfs, filled while the server
// runs, the store on PostgreSQL. Before, /readyz kept answering
// "segment":"ok" while most new tags failed (235 of 285 in the run);
// now the first refused mark makes it 503 with the cause, so a load
// balancer stops sending new work. Once space is freed, /readyz (which
// stores the failed mark again) is 200 by itself, although no client
// request came in meanwhile, and new tags serve again.
func TestReadyzFullDisk(t *testing.T) {
	t.Parallel()
	const tags = 400 // more first uses than the log's last page has room for
	full := tmpfs(t, 1<<20)
	d := newDB(t, "postgres")
	for i := range tags {
		d.create(t, fmt.Sprintf("new-%03d", i), int64(i+1)*tagSpace, 10)
	}
	p := start(t, t.TempDir(), "--migrate=false", "--snowflake=false", "--segment-dsn", d.direct, "--data-dir", full)
	ready := func() (int, string) {
		t.Helper()
		status, body, err := p.Get(t.Context(), "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		return status, body
	}
	if status, body := ready(); status != 200 || !strings.Contains(body, `"segment":"ok"`) {
		t.Fatalf("/readyz before the disk filled = %d %s, want 200", status, body)
	}
	fl := fill(t, full)
	refused, served := -1, 0
	for i := range tags {
		status, _, err := p.Get(t.Context(), fmt.Sprintf("/api/segment/get/new-%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		if status != 200 {
			refused = i
			break
		}
		served++
	}
	if refused < 0 {
		t.Fatalf("all %d new tags served on a full disk", tags)
	}
	t.Logf("%d new tags served from the log's last page, then new-%03d refused", served, refused)
	status, body := ready()
	if status != 503 || !strings.Contains(body, "high-water marks cannot be stored") || !strings.Contains(body, "no space left on device") {
		t.Fatalf("/readyz with the marks log on a full disk = %d %s, want 503 naming the marks and ENOSPC", status, body)
	}
	fl.free()
	deadline := time.Now().Add(20 * time.Second)
	for status, body = ready(); status != 200; status, body = ready() {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 20 s after space was freed = %d %s, want 200", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		status, body, err := p.Get(t.Context(), fmt.Sprintf("/api/segment/get/new-%03d", refused))
		if err != nil {
			t.Fatal(err)
		}
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new-%03d 20 s after space was freed = %d %s, want 200", refused, status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
