package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want string
	}{
		// The worked examples of docs/contract.md §6.
		{"twitter 1/1", []string{"--timestamp", "1288834975657", "--datacenter", "1", "--machine", "1", "--sequence", "0"}, "4194439168"},
		{"twitter 7/13", []string{"--timestamp", "1700000000000", "--datacenter", "7", "--machine", "13", "--sequence", "4095"}, "1724551110457221119"},
		{"worker 237", []string{"--timestamp", "1700000000000", "--worker", "237", "--sequence", "4095"}, "1724551110457221119"},
		{"rfc3339 UTC", []string{"--time", "2023-11-14T22:13:20Z", "--worker", "237", "--sequence", "4095"}, "1724551110457221119"},
		{"rfc3339 offset", []string{"--time", "2023-11-15T06:13:20.000+08:00", "--worker", "237", "--sequence", "4095"}, "1724551110457221119"},
		{"sequence defaults to 0", []string{"--timestamp", "1288834975657", "--datacenter", "1", "--machine", "1"}, "4194439168"},
		{"the epoch", []string{"--timestamp", "1288834974657", "--worker", "0"}, "0"},
		{"other epoch", []string{"--timestamp", "1000", "--worker", "1", "--epoch-ms", "0"}, "4194308096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := must(t, append([]string{"encode"}, tt.give...)...)
			if got := strings.TrimSuffix(out.stdout, "\n"); got != tt.want {
				t.Errorf("encode %q = %q, want %s", tt.give, got, tt.want)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		give      string
		wantLines []string
	}{
		{"1724551110457221119", []string{
			"id            1724551110457221119",
			"timestamp     1700000000000 ms (Unix), 411165025343 ms after the epoch 1288834974657",
			"time (UTC)    2023-11-14T22:13:20.000Z",
			"worker        237 (Twitter's view: datacenter 7, machine 13)",
			"sequence      4095",
			"bits          sign  time (41)                                  worker (10)  sequence (12)",
			"              0     00101111110111011010110000110010000111111  0011101101   111111111111",
		}},
		{"4194439168", []string{
			"timestamp     1288834975657 ms (Unix), 1000 ms after the epoch 1288834974657",
			"time (UTC)    2010-11-04T01:42:55.657Z",
			"worker        33 (Twitter's view: datacenter 1, machine 1)",
			"sequence      0",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			out := must(t, "decode", tt.give)
			lines := strings.Split(out.stdout, "\n")
			for _, want := range tt.wantLines {
				found := false
				for _, l := range lines {
					found = found || l == want
				}
				if !found {
					t.Errorf("decode %s lacks the line %q:\n%s", tt.give, want, out.stdout)
				}
			}
			if !strings.Contains(out.stdout, "time (local)  ") {
				t.Errorf("decode %s has no local time:\n%s", tt.give, out.stdout)
			}
		})
	}
}

func TestDecodeJSON(t *testing.T) {
	var v idView
	if err := json.Unmarshal([]byte(must(t, "decode", "1724551110457221119", "--json").stdout), &v); err != nil {
		t.Fatalf("decode --json: %v", err)
	}
	want := idView{Description: snowflake.Description{
		ID: "1724551110457221119", Timestamp: 1700000000000, Time: "2023-11-14T22:13:20.000Z",
		Worker: 237, Datacenter: 7, Machine: 13, Sequence: 4095,
	}}
	want.Layout.EpochMillis, want.Layout.TimeBits, want.Layout.WorkerBits, want.Layout.SequenceBits = snowflake.DefaultEpochMillis, 41, 10, 12
	want.Layout.IDBits, want.Layout.MaxID = 63, "9223372036854775807"
	got := v
	got.LocalTime, got.Bits = "", snowflake.Bits{}
	if got != want {
		t.Errorf("decode --json = %+v, want %+v", got, want)
	}
	b := v.Bits
	if b.Sign+b.Time+b.Worker+b.Sequence != b.All || len(b.All) != 64 || b.Worker != "0011101101" || b.Sequence != "111111111111" {
		t.Errorf("decode --json bits = %+v, want 64 bits split 1/41/10/12", b)
	}
	if lt, err := time.Parse(snowflake.ISOMillis, v.LocalTime); err != nil || lt.UnixMilli() != 1700000000000 {
		t.Errorf("decode --json localTime = %q (%v), want the same instant", v.LocalTime, err)
	}

	// encode --json is the same view.
	var e idView
	if err := json.Unmarshal([]byte(must(t, "encode", "--timestamp", "1700000000000", "--datacenter", "7", "--machine", "13", "--sequence", "4095", "--json").stdout), &e); err != nil {
		t.Fatalf("encode --json: %v", err)
	}
	if e != v {
		t.Errorf("encode --json = %+v, want decode's %+v", e, v)
	}
}

func TestViewLocalTime(t *testing.T) {
	shanghai := time.FixedZone("CST", 8*3600)
	v := view(snowflake.DefaultLayout(), 1724551110457221119, shanghai)
	if want := "2023-11-15T06:13:20.000+08:00"; v.LocalTime != want {
		t.Errorf("view(…, UTC+8).LocalTime = %q, want %q", v.LocalTime, want)
	}
}

func TestCodecErrors(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want string // in the error
	}{
		{"decode not a number", []string{"decode", "abc"}, `"abc" is not an ID`},
		{"decode negative", []string{"decode", "--", "-1"}, `"-1" is not an ID`},
		// Without "--" the flag parser sees -1 first; still an ID error, not "unknown shorthand flag".
		{"decode -1", []string{"decode", "-1"}, `"-1" is not an ID: want a decimal integer from 0 to 9223372036854775807`},
		{"decode -1 --json", []string{"decode", "--json", "-1"}, `"-1" is not an ID`},
		{"decode -1.5", []string{"decode", "-1.5"}, `"-1.5" is not an ID`},
		{"decode -huge", []string{"decode", "-99999999999999999999"}, `"-99999999999999999999" is not an ID`},
		{"decode fraction", []string{"decode", "1.5"}, `"1.5" is not an ID: want a decimal integer from 0 to 9223372036854775807`},
		{"decode unknown flag", []string{"decode", "-x", "1"}, `unknown shorthand flag: 'x'`},
		{"decode too big", []string{"decode", "9223372036854775808"}, "is not an ID"},
		{"decode empty", []string{"decode", ""}, "is not an ID"},
		{"decode hex", []string{"decode", "0x10"}, "is not an ID"},
		{"decode no id", []string{"decode"}, "takes one ID"},
		{"decode future epoch", []string{"decode", "1", "--epoch-ms", "99999999999999"}, "not in the past"},
		{"encode no time", []string{"encode", "--worker", "1"}, "exactly one of --timestamp"},
		{"encode both times", []string{"encode", "--timestamp", "1700000000000", "--time", "2023-11-14T22:13:20Z", "--worker", "1"}, "exactly one of --timestamp"},
		{"encode bad time", []string{"encode", "--time", "yesterday", "--worker", "1"}, "is not RFC 3339"},
		{"encode no worker", []string{"encode", "--timestamp", "1700000000000"}, "give --worker"},
		{"encode worker and datacenter", []string{"encode", "--timestamp", "1700000000000", "--worker", "1", "--datacenter", "1", "--machine", "1"}, "not both"},
		{"encode datacenter alone", []string{"encode", "--timestamp", "1700000000000", "--datacenter", "1"}, "go together"},
		{"encode worker 1024", []string{"encode", "--timestamp", "1700000000000", "--worker", "1024"}, "1024 not in [0, 1023]"},
		{"encode worker -1", []string{"encode", "--timestamp", "1700000000000", "--worker", "-1"}, "-1 not in [0, 1023]"},
		{"encode datacenter 32", []string{"encode", "--timestamp", "1700000000000", "--datacenter", "32", "--machine", "0"}, "32 not in [0, 31]"},
		{"encode machine 32", []string{"encode", "--timestamp", "1700000000000", "--datacenter", "0", "--machine", "32"}, "32 not in [0, 31]"},
		{"encode sequence 4096", []string{"encode", "--timestamp", "1700000000000", "--worker", "1", "--sequence", "4096"}, "4096 not in [0, 4095]"},
		{"encode before epoch", []string{"encode", "--timestamp", "1288834974656", "--worker", "1"}, "1288834974656 ms not in"},
		{"encode after end", []string{"encode", "--time", "2080-07-10T17:30:30.209Z", "--worker", "1"}, "ms not in"},
		{"encode worker abc", []string{"encode", "--timestamp", "1700000000000", "--worker", "abc"}, `invalid argument "abc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := leafctl(t, opts{}, tt.give...)
			if out.code != exitUsage || out.err == nil || !strings.Contains(out.err.Error(), tt.want) {
				t.Errorf("leafctl %q = exit %d, %v; want exit 2 with %q", tt.give, out.code, out.err, tt.want)
			}
			if out.stdout != "" {
				t.Errorf("leafctl %q printed %q on stdout, want nothing", tt.give, out.stdout)
			}
		})
	}
}
