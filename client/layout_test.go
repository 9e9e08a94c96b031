package client_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/client"
)

// TestLayout53EndToEnd runs a real leaf-server with a 53-bit snowflake layout
// (issue 22 item 3): every ID, from the batch route through the Go client and
// from Leaf's single-ID route, is at most 2^53-1; the client reads the
// server's layout and decodes with it; the decode route agrees and encode
// gives the same ID back.
func TestLayout53EndToEnd(t *testing.T) {
	const maxSafe = 1<<53 - 1 // JavaScript's Number.MAX_SAFE_INTEGER
	p := startServer(t, t.TempDir(), "--segment=false", "--time-bits", "41", "--worker-bits", "4", "--sequence-bits", "8",
		"--worker-id", "9")
	c, err := client.New(p.base(), client.Options{BatchSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.SnowflakeLayout(t.Context())
	if err != nil {
		t.Fatalf("SnowflakeLayout() error %v", err)
	}
	if want := (client.Layout{EpochMillis: 1288834974657, TimeBits: 41, WorkerBits: 4, SequenceBits: 8}); l != want {
		t.Fatalf("SnowflakeLayout() = %+v, want %+v", l, want)
	}
	if l.MaxID() != maxSafe {
		t.Fatalf("MaxID() = %d, want %d", l.MaxID(), int64(maxSafe))
	}
	var ids []int64
	for range 2000 { // four batches
		id, err := c.Snowflake(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	status, body := p.get(t, "/api/snowflake/get/x")
	one, perr := strconv.ParseInt(body, 10, 64)
	if status != http.StatusOK || perr != nil {
		t.Fatalf("GET /api/snowflake/get/x = %d %q", status, body)
	}
	ids = append(ids, one)
	seen := map[int64]bool{}
	for _, id := range ids {
		if id <= 0 || id > maxSafe {
			t.Fatalf("ID %d outside (0, 2^53-1]", id)
		}
		if seen[id] {
			t.Fatalf("ID %d twice", id)
		}
		seen[id] = true
		parts, err := l.Decode(id)
		if err != nil || parts.Worker != 9 || time.Since(parts.Time).Abs() > time.Minute {
			t.Fatalf("Decode(%d) = %+v, %v, want worker 9 and about now", id, parts, err)
		}
	}
	// The server's decode and encode follow the same layout and round-trip.
	for _, id := range []int64{ids[0], ids[len(ids)-1]} {
		status, body := p.get(t, "/api/v1/snowflake/decode/"+strconv.FormatInt(id, 10))
		var d struct {
			ID        string `json:"id"`
			Timestamp int64  `json:"timestamp"`
			Worker    int64  `json:"worker"`
			Sequence  int64  `json:"sequence"`
			Bits      struct {
				Unused string `json:"unused"`
				Time   string `json:"time"`
			} `json:"bits"`
		}
		if err := json.Unmarshal([]byte(body), &d); status != http.StatusOK || err != nil {
			t.Fatalf("decode %d = %d %s (%v)", id, status, body, err)
		}
		parts, _ := l.Decode(id)
		if d.ID != strconv.FormatInt(id, 10) || d.Timestamp != parts.Time.UnixMilli() || d.Worker != 9 || d.Sequence != parts.Sequence ||
			d.Bits.Unused != "0000000000" || len(d.Bits.Time) != 41 {
			t.Errorf("decode %d = %s, want timestamp %d, worker 9, sequence %d, 10 unused bits, 41 time bits", id, body, parts.Time.UnixMilli(), parts.Sequence)
		}
		q := "/api/v1/snowflake/encode?timestamp=" + strconv.FormatInt(d.Timestamp, 10) + "&worker=9&sequence=" + strconv.FormatInt(d.Sequence, 10)
		status, body = p.get(t, q)
		if status != http.StatusOK || !strings.Contains(body, `"id":"`+strconv.FormatInt(id, 10)+`"`) {
			t.Errorf("GET %s = %d %s, want the ID %d back", q, status, body, id)
		}
	}
	// An ID the layout cannot make is refused, by the server and the client.
	status, body = p.get(t, "/api/v1/snowflake/decode/9007199254740992")
	if status != http.StatusBadRequest || !strings.Contains(body, "53-bit layout") {
		t.Errorf("decode 2^53 = %d %s, want 400 naming the 53-bit layout", status, body)
	}
	if _, err := l.Decode(maxSafe + 1); !errors.Is(err, client.ErrNotInLayout) {
		t.Errorf("Decode(2^53) error = %v, want ErrNotInLayout", err)
	}
}
