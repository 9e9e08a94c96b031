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
		// IDBits is TimeBits+WorkerBits+SequenceBits: 63, or fewer for a
		// narrower layout (53 keeps IDs exact in JavaScript).
		IDBits int `json:"idBits"`
		// MaxID is the largest ID of the layout, 2^IDBits-1, in decimal.
		MaxID string `json:"maxId"`
	} `json:"layout"`
}

// Bits are the 64 bits of an ID as binary digits, most significant first,
// split by field; Sign+Unused+Time+Worker+Sequence == All. Unused is the
// bits between the sign and the time field of a layout narrower than 63
// bits (all 0 in an ID of the layout), "" for a 63-bit layout.
type Bits struct {
	Sign     string `json:"sign"`
	Unused   string `json:"unused,omitempty"`
	Time     string `json:"time"`
	Worker   string `json:"worker"`
	Sequence string `json:"sequence"`
	All      string `json:"all"`
}

// ISOMillis is the time format of Description.Time.
const ISOMillis = "2006-01-02T15:04:05.000Z07:00"

// Describe decodes id with l. It is pure and total like Decompose: bits of
// id above l.Bits() show in Bits.Sign and Bits.Unused and are ignored by the
// fields.
func (l Layout) Describe(id int64) Description {
	p := l.Decompose(id)
	all := strconv.FormatUint(uint64(id), 2)
	all = strings.Repeat("0", 64-len(all)) + all
	tb, wb := l.TimeBits, l.WorkerBits
	u := max(63-l.Bits(), 0) // unused bits below the sign
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
			Unused:   all[1 : 1+u],
			Time:     all[1+u : 1+u+tb],
			Worker:   all[1+u+tb : 1+u+tb+wb],
			Sequence: all[1+u+tb+wb:],
			All:      all,
		},
	}
	d.Layout.EpochMillis, d.Layout.TimeBits, d.Layout.WorkerBits, d.Layout.SequenceBits = l.EpochMillis(), tb, wb, l.SequenceBits
	d.Layout.IDBits, d.Layout.MaxID = l.Bits(), strconv.FormatInt(l.MaxID(), 10)
	return d
}
