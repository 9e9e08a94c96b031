package bizno_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leaf-go/leaf/bizno"
)

var dec1 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func TestFormat(t *testing.T) {
	tests := []struct {
		name  string
		give  string
		group bizno.Group
		seq   int64
		want  string
	}{
		{"order", "ORD{yyyyMMdd}{seq:6}", bizno.Day, 123, "ORD20261201000123"},
		{"numeric", "{yyyyMMdd}{seq:6}", bizno.Day, 1, "20261201000001"},
		{"separators", "INV-{yyyy-MM-dd}-{seq:4}", bizno.Day, 42, "INV-2026-12-01-0042"},
		{"yy month", "{yyMM}{seq:5}", bizno.Month, 99999, "261299999"},
		{"radix36", "X{yyyy}{seq36:4}", bizno.Year, 36*36 + 35, "X2026010Z"},
		{"radix36 max", "{yyyy}{seq36:2}", bizno.Year, 36*36 - 1, "2026ZZ"},
		{"seq first", "{seq:3}.{yyyyMMdd}", bizno.Day, 7, "007.20261201"},
		{"uuuu", "{uuuuMMdd}{seq:2}", bizno.Day, 10, "2026120110"},
		{"max width", "{yyyy}{seq:18}", bizno.Year, 999_999_999_999_999_999, "2026999999999999999999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := bizno.Parse(tt.give, tt.group)
			if err != nil {
				t.Fatalf("Parse(%q) = %v", tt.give, err)
			}
			got, err := tp.Format(nil, dec1, tt.seq)
			if err != nil || string(got) != tt.want {
				t.Fatalf("Format(%d) = %q, %v, want %q", tt.seq, got, err, tt.want)
			}
			if tp.Len() != len(tt.want) {
				t.Errorf("Len() = %d, want %d", tp.Len(), len(tt.want))
			}
			p, err := tp.Parse(string(got))
			if err != nil || p.Seq != tt.seq || p.Year != 2026 {
				t.Errorf("Parse(%q) = %+v, %v, want seq %d year 2026", got, p, err, tt.seq)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		give  string
		group bizno.Group
	}{
		{"", bizno.Day},
		{"ORD{yyyyMMdd}", bizno.Day},            // no sequence
		{"{yyyyMMdd}{seq:6}{seq:2}", bizno.Day}, // two sequences
		{"{yyyyMM}{seq:6}", bizno.Day},          // day group without dd
		{"{yyyyMMdd}{seq:6}", bizno.Month},      // dd constant in a month
		{"{yyyyMM}{seq:6}", bizno.Year},         // MM constant in a year
		{"{MMdd}{seq:6}", bizno.Day},            // no year
		{"{yyyyMMdd}{seq:0}", bizno.Day},        // width 0
		{"{yyyyMMdd}{seq:19}", bizno.Day},       // past int64
		{"{yyyyMMdd}{seq36:13}", bizno.Day},     // past int64
		{"{yyyyMMdd}{seq:06}", bizno.Day},       // not canonical
		{"{yyyyMMdd}{seq:x}", bizno.Day},        // not a number
		{"{yyyyMMdd}{hex:4}", bizno.Day},        // unknown field
		{"{yyyyMMdd}{seq:6", bizno.Day},         // unclosed
		{"A/B{yyyyMMdd}{seq:6}", bizno.Day},     // '/' breaks the parse route
		{"A B{yyyyMMdd}{seq:6}", bizno.Day},     // space
		{"{yyyyMMddHH}{seq:6}", bizno.Day},      // hour not a period field
		{"{yyyyMMdd}{yyyy}{seq:6}", bizno.Day},  // repeated field
		{"{yyyyyMMdd}{seq:6}", bizno.Day},       // 5 y
		{"{yyyyMd}{seq:6}", bizno.Day},          // variable width M
		{"{yyyyMMdd}{}{seq:6}", bizno.Day},      // empty field
		{"{yyyyMMdd}{seq:6}", bizno.Group(9)},   // bad group
		{"{yyyyMMdd}{seq:6}}", bizno.Day},       // stray brace
	}
	for _, tt := range tests {
		if tp, err := bizno.Parse(tt.give, tt.group); !errors.Is(err, bizno.ErrTemplate) {
			t.Errorf("Parse(%q, %v) = %v, %v, want ErrTemplate", tt.give, tt.group, tp, err)
		}
	}
}

// TestFormatOverflow: a sequence past the width is refused, never widened
// or wrapped.
func TestFormatOverflow(t *testing.T) {
	tests := []struct {
		give string
		seq  int64
	}{
		{"{yyyyMMdd}{seq:6}", 1_000_000},
		{"{yyyyMMdd}{seq:6}", 0},
		{"{yyyyMMdd}{seq:6}", -1},
		{"{yyyyMMdd}{seq36:2}", 36 * 36},
		{"{yyyyMMdd}{seq:18}", 1_000_000_000_000_000_000},
	}
	for _, tt := range tests {
		tp, err := bizno.Parse(tt.give, bizno.Day)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tp.Format([]byte("x"), dec1, tt.seq)
		if !errors.Is(err, bizno.ErrWidth) || string(got) != "x" {
			t.Errorf("%s Format(%d) = %q, %v, want ErrWidth and dst unchanged", tt.give, tt.seq, got, err)
		}
	}
	tp, _ := bizno.Parse("{yyyyMMdd}{seq:6}", bizno.Day)
	if got, err := tp.Format(nil, dec1, 999_999); err != nil || string(got) != "20261201999999" {
		t.Errorf("Format(999999) = %q, %v, want the last ID of the width", got, err)
	}
}

func TestParseBack(t *testing.T) {
	tp, _ := bizno.Parse("ORD{yyyyMMdd}{seq:6}", bizno.Day)
	for _, give := range []string{
		"ORD20261201000000",  // sequence 0
		"ORD2026120100012",   // short
		"ORD202612010001234", // long
		"ABC20261201000123",  // literal
		"ORD20261301000123",  // month 13
		"ORD20260230000123",  // 30 February
		"ORD2026120100012x",  // not digits
		"ORD20261200000123",  // day 0
	} {
		if p, err := tp.Parse(give); !errors.Is(err, bizno.ErrNoMatch) {
			t.Errorf("Parse(%q) = %+v, %v, want ErrNoMatch", give, p, err)
		}
	}
	t36, _ := bizno.Parse("{yyyy}{seq36:3}", bizno.Year)
	if p, err := t36.Parse("2026a0b"); !errors.Is(err, bizno.ErrNoMatch) {
		t.Errorf("Parse of lower-case radix 36 = %+v, %v, want ErrNoMatch", p, err)
	}
}

func TestNumeric(t *testing.T) {
	tests := []struct {
		give  string
		group bizno.Group
		want  bool
	}{
		{"{yyyyMMdd}{seq:6}", bizno.Day, true},
		{"{yyyyMMdd}{seq:10}", bizno.Day, true},  // 18 digits
		{"{yyyyMMdd}{seq:11}", bizno.Day, false}, // 19 digits may pass int64
		{"9{yyyyMMdd}{seq:6}", bizno.Day, true},
		{"0{yyyyMMdd}{seq:6}", bizno.Day, false}, // leading zero would be lost
		{"{yyMMdd}{seq:6}", bizno.Day, false},    // yy may start with 0
		{"{seq:6}{yyyyMMdd}", bizno.Day, false},
		{"ORD{yyyyMMdd}{seq:6}", bizno.Day, false},
		{"{yyyy-MM-dd}{seq:6}", bizno.Day, false},
		{"{yyyy}{seq36:4}", bizno.Year, false},
	}
	for _, tt := range tests {
		tp, err := bizno.Parse(tt.give, tt.group)
		if err != nil {
			t.Fatalf("Parse(%q) = %v", tt.give, err)
		}
		if got := tp.Numeric(); got != tt.want {
			t.Errorf("Numeric(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestGroupPeriods(t *testing.T) {
	sh, err := time.LoadLocation("America/Santiago") // DST starts at local midnight
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	tests := []struct {
		g        bizno.Group
		give     time.Time
		wantKey  string
		wantNext string
	}{
		{bizno.Day, time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), "20261231", "20270101"},
		{bizno.Month, time.Date(2026, 2, 28, 12, 0, 0, 0, time.UTC), "202602", "202603"},
		{bizno.Year, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), "2026", "2027"},
		// Chile moves its clocks from 00:00 to 01:00 on 6 September 2026.
		{bizno.Day, time.Date(2026, 9, 6, 4, 30, 0, 0, time.UTC), "20260906", "20260907"},
		{bizno.Day, time.Date(2026, 9, 5, 23, 30, 0, 0, sh), "20260905", "20260906"},
	}
	for _, tt := range tests {
		loc := tt.give.Location()
		if tt.wantKey == "20260906" {
			loc = sh
		}
		start := tt.g.Start(tt.give, loc)
		if k := tt.g.Key(start); k != tt.wantKey {
			t.Errorf("Key(Start(%v)) = %s, want %s", tt.give, k, tt.wantKey)
		}
		next := tt.g.Next(start)
		if k := tt.g.Key(next); k != tt.wantNext || !next.After(tt.give) {
			t.Errorf("Key(Next) = %s at %v, want %s after %v", k, next, tt.wantNext, tt.give)
		}
		back, err := tt.g.ParseKey(tt.wantKey, loc)
		if err != nil || !back.Equal(start) {
			t.Errorf("ParseKey(%s) = %v, %v, want %v", tt.wantKey, back, err, start)
		}
	}
	if _, err := bizno.Day.ParseKey("2026120", time.UTC); !errors.Is(err, bizno.ErrNoMatch) {
		t.Errorf("ParseKey(short) = %v, want ErrNoMatch", err)
	}
	if _, err := bizno.ParseGroup("week"); !errors.Is(err, bizno.ErrGroup) {
		t.Errorf("ParseGroup(week) = %v, want ErrGroup", err)
	}
}

// FuzzRoundTrip: every ID Format makes parses back to its period and
// sequence, and distinct inputs make distinct IDs.
func FuzzRoundTrip(f *testing.F) {
	f.Add("ORD{yyyyMMdd}{seq:6}", uint8(1), int64(123), int64(0))
	f.Add("{yyyy}{seq36:4}", uint8(3), int64(1), int64(400))
	f.Add("{yy-MM}_{seq:3}", uint8(2), int64(999), int64(-40))
	f.Fuzz(func(t *testing.T, src string, g uint8, seq int64, days int64) {
		group := bizno.Group(g%3 + 1)
		tp, err := bizno.Parse(src, group)
		if err != nil {
			if !errors.Is(err, bizno.ErrTemplate) {
				t.Fatalf("Parse(%q) = %v, not ErrTemplate", src, err)
			}
			return
		}
		start := group.Start(dec1.AddDate(0, 0, int(days%20000)), time.UTC)
		id, err := tp.Format(nil, start, seq)
		if seq < 1 || seq > tp.Capacity() {
			if !errors.Is(err, bizno.ErrWidth) {
				t.Fatalf("Format(%d) over capacity %d = %q, %v", seq, tp.Capacity(), id, err)
			}
			return
		}
		if err != nil || len(id) != tp.Len() {
			t.Fatalf("Format(%d) = %q, %v, want %d bytes", seq, id, err, tp.Len())
		}
		p, err := tp.Parse(string(id))
		if err != nil {
			t.Fatalf("Parse(Format) of %q = %v", id, err)
		}
		wantYear := start.Year()
		if p.Year != wantYear && p.Year%100 != wantYear%100 { // yy reads 20yy
			t.Fatalf("Parse(%q).Year = %d, want %d", id, p.Year, wantYear)
		}
		if p.Seq != seq || p.Month != start.Month() || p.Day != start.Day() {
			t.Fatalf("Parse(%q) = %+v, want seq %d of %v", id, p, seq, start)
		}
		if seq > 1 {
			other, _ := tp.Format(nil, start, seq-1)
			if string(other) == string(id) {
				t.Fatalf("seq %d and %d both format as %q", seq, seq-1, id)
			}
		}
	})
}

func ExampleTemplate_Format() {
	tp, err := bizno.Parse("ORD{yyyyMMdd}{seq:6}", bizno.Day)
	if err != nil {
		panic(err)
	}
	id, _ := tp.Format(nil, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 123)
	p, _ := tp.Parse(string(id))
	fmt.Println(string(id), p.Year, p.Month, p.Day, p.Seq)
	// Output: ORD20261201000123 2026 December 1 123
}
