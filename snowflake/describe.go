package snowflake

import (
	"strconv"
	"strings"
	"time"
)

// Description is a decoded ID as the decode API and leafctl show it: fields,
// time and the 64 bits split by field. The ID is a string because 64-bit IDs
// pass JavaScript's 2^53.
type Description struct {
	ID         string `json:"id"`
	Timestamp  int64  `json:"timestamp"` // Unix ms
	Time       string `json:"time"`      // ISO-8601 UTC, ms precision
	Worker     int64  `json:"worker"`
	Datacenter int64  `json:"datacenter"` // Twitter's 5-bit view of Worker
	Machine    int64  `json:"machine"`    // Twitter's 5-bit view of Worker
	Sequence   int64  `json:"sequence"`
	Bits       Bits   `json:"bits"`
	Layout     struct {
		EpochMillis  int64 `json:"epoch"`
		TimeBits     int   `json:"timeBits"`
		WorkerBits   int   `json:"workerBits"`
		SequenceBits int   `json:"sequenceBits"`
	} `json:"layout"`
}

// Bits are the 64 bits of an ID as binary digits, most significant first,
// split by field; Sign+Time+Worker+Sequence == All.
type Bits struct {
	Sign     string `json:"sign"`
	Time     string `json:"time"`
	Worker   string `json:"worker"`
	Sequence string `json:"sequence"`
	All      string `json:"all"`
}

// ISOMillis is the time format of Description.Time.
const ISOMillis = "2006-01-02T15:04:05.000Z07:00"

// Describe decodes id with l. It is pure and total like Decompose.
func (l Layout) Describe(id int64) Description {
	p := l.Decompose(id)
	all := strconv.FormatUint(uint64(id), 2)
	all = strings.Repeat("0", 64-len(all)) + all
	tb, wb := l.TimeBits, l.WorkerBits
	d := Description{
		ID:         strconv.FormatInt(id, 10),
		Timestamp:  p.Millis,
		Time:       time.UnixMilli(p.Millis).UTC().Format(ISOMillis),
		Worker:     p.Worker,
		Datacenter: p.Datacenter,
		Machine:    p.Machine,
		Sequence:   p.Sequence,
		Bits: Bits{
			Sign:     all[:1],
			Time:     all[1 : 1+tb],
			Worker:   all[1+tb : 1+tb+wb],
			Sequence: all[1+tb+wb:],
			All:      all,
		},
	}
	d.Layout.EpochMillis, d.Layout.TimeBits, d.Layout.WorkerBits, d.Layout.SequenceBits = l.EpochMillis(), tb, wb, l.SequenceBits
	return d
}
