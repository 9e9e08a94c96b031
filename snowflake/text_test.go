package snowflake_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

func TestText(t *testing.T) {
	l := snowflake.DefaultLayout()
	ms := time.Date(2026, 12, 1, 9, 30, 0, 123e6, time.UTC).UnixMilli()
	id, _ := l.Compose(ms, 42, 7)
	got, err := l.Text(id)
	if err != nil || got != "20261201093000123-0042-0007" {
		t.Fatalf("Text(%d) = %q, %v, want 20261201093000123-0042-0007", id, got, err)
	}
	back, err := l.ParseText(got)
	if err != nil || back != id {
		t.Fatalf("ParseText(%q) = %d, %v, want %d", got, back, err, id)
	}
	for _, bad := range []string{"", "20261201093000123-042-0007", "20261301093000123-0042-0007",
		"20261201093000123-0042-4096", "20261201093000123-1024-0007", "2026120109300012x-0042-0007",
		"20261201093000123_0042_0007", "19700101000000000-0000-0000"} {
		if v, err := l.ParseText(bad); err == nil {
			t.Errorf("ParseText(%q) = %d, want an error", bad, v)
		}
	}
	if _, err := l.Text(-1); !errors.Is(err, snowflake.ErrText) {
		t.Errorf("Text(-1) = %v, want ErrText", err)
	}
}

// FuzzText: Text and ParseText round-trip, and text forms sort as IDs.
func FuzzText(f *testing.F) {
	f.Add(int64(1), int64(2))
	f.Add(int64(1)<<62, int64(5))
	f.Fuzz(func(t *testing.T, a, b int64) {
		l := snowflake.DefaultLayout()
		var texts []string
		ids := []int64{a & (1<<63 - 1), b & (1<<63 - 1)}
		for _, id := range ids {
			s, err := l.Text(id)
			if err != nil {
				return // past year 9999
			}
			back, err := l.ParseText(s)
			if err != nil || back != id {
				t.Fatalf("ParseText(Text(%d) = %q) = %d, %v", id, s, back, err)
			}
			texts = append(texts, s)
		}
		if (ids[0] < ids[1]) != (texts[0] < texts[1]) {
			t.Fatalf("IDs %d < %d is %v, texts %q < %q is not", ids[0], ids[1], ids[0] < ids[1], texts[0], texts[1])
		}
	})
}

func ExampleLayout_Text() {
	l := snowflake.DefaultLayout()
	id, _ := l.Compose(time.Date(2026, 12, 1, 9, 30, 0, 123e6, time.UTC).UnixMilli(), 42, 7)
	s, _ := l.Text(id)
	back, _ := l.ParseText(s)
	fmt.Println(s, back == id)
	// Output: 20261201093000123-0042-0007 true
}
