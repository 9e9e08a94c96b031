package snowflake

import (
	"fmt"
	"time"
)

// DefaultEpochMillis is the default epoch in Unix milliseconds: 1288834974657 is
// 2010-11-04T01:42:54.657Z, Twitter's snowflake epoch, which Leaf's SnowflakeIDGenImpl
// (twepoch) uses too. IDs from Leaf and from leaf-go with the default layout are comparable.
const DefaultEpochMillis int64 = 1288834974657

// MachineBits is the width of the machine part in Twitter's view of the worker field: the
// low 5 bits are the machine, the bits above them the datacenter (Twitter's snowflake,
// `datacenterId << 17 | workerId << 12` with the default layout).
const MachineBits = 5

// Layout is the split of the low bits of an ID into time, worker and sequence fields: 63 bits
// (the sign bit stays 0) or fewer, so that every ID stays below 2^Bits(). 53 bits keep every ID
// exact in a JavaScript number (IEEE 754 double: integers up to 2^53-1).
//
//	id = (ms - epoch) << (WorkerBits + SequenceBits) | worker << SequenceBits | sequence
//
// The zero Layout is not valid; Settings treats it as DefaultLayout(). A Layout is a plain
// value: its methods never change it and are safe for concurrent use.
type Layout struct {
	// Epoch is the instant that the time field counts from, in whole milliseconds (any
	// sub-millisecond part is ignored). It must lie in the past.
	Epoch time.Time
	// TimeBits is the width of the time field in bits, 32..61: the layout lasts 2^TimeBits ms
	// after Epoch (41 bits: about 69.7 years).
	TimeBits int
	// WorkerBits is the width of the worker field in bits, 1..20: worker IDs 0..2^WorkerBits-1.
	WorkerBits int
	// SequenceBits is the width of the sequence field in bits, 1..22: up to 2^SequenceBits IDs
	// per millisecond and worker.
	SequenceBits int
}

// DefaultLayout returns Leaf's and Twitter's layout: 41 bits of milliseconds since
// DefaultEpochMillis, 10 bits of worker ID (0..1023), 12 bits of sequence (0..4095). It runs
// out in July 2080 (see Layout.End).
func DefaultLayout() Layout {
	return Layout{
		Epoch:        time.UnixMilli(DefaultEpochMillis).UTC(),
		TimeBits:     41,
		WorkerBits:   10,
		SequenceBits: 12,
	}
}

func (l Layout) isZero() bool {
	return l.Epoch.IsZero() && l.TimeBits == 0 && l.WorkerBits == 0 && l.SequenceBits == 0
}

// Validate reports whether the layout can be used at instant now: the widths sum to at most 63
// (the sign bit stays 0, so IDs are positive int64s, as in Leaf and Twitter; 63 is their
// layout, 53 keeps IDs exact in JavaScript), each width is in the
// range documented on its field, the epoch is before now, and the layout has not run out at
// now. The error wraps ErrInvalidLayout.
func (l Layout) Validate(now time.Time) error {
	if err := l.validWidths(); err != nil {
		return err
	}
	switch {
	case l.Epoch.IsZero() || !l.Epoch.Before(now):
		return fmt.Errorf("%w: epoch %s is not in the past (now %s)", ErrInvalidLayout, l.Epoch.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	case !now.Before(l.End()):
		return fmt.Errorf("%w: layout ran out at %s", ErrInvalidLayout, l.End().UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// validWidths is the part of Validate that does not depend on the time: the widths sum to at
// most 63 and each lies in the range documented on its field.
func (l Layout) validWidths() error {
	switch {
	case l.TimeBits+l.WorkerBits+l.SequenceBits > 63:
		return fmt.Errorf("%w: widths %d+%d+%d sum to %d, must be at most 63", ErrInvalidLayout, l.TimeBits, l.WorkerBits, l.SequenceBits,
			l.TimeBits+l.WorkerBits+l.SequenceBits)
	case l.TimeBits < 32 || l.TimeBits > 61:
		return fmt.Errorf("%w: time bits %d not in [32, 61]", ErrInvalidLayout, l.TimeBits)
	case l.WorkerBits < 1 || l.WorkerBits > 20:
		return fmt.Errorf("%w: worker bits %d not in [1, 20]", ErrInvalidLayout, l.WorkerBits)
	case l.SequenceBits < 1 || l.SequenceBits > 22:
		return fmt.Errorf("%w: sequence bits %d not in [1, 22]", ErrInvalidLayout, l.SequenceBits)
	}
	return nil
}

// Bits returns the width of an ID of the layout: TimeBits + WorkerBits + SequenceBits, 63 for
// DefaultLayout. Every ID of the layout lies in [0, 2^Bits()).
func (l Layout) Bits() int { return l.TimeBits + l.WorkerBits + l.SequenceBits }

// MaxID returns the largest ID the layout can hold, 2^Bits()-1: 9007199254740991
// (JavaScript's Number.MAX_SAFE_INTEGER) for a 53-bit layout.
func (l Layout) MaxID() int64 { return int64(uint64(1)<<l.Bits() - 1) }

// Capacity returns how many IDs one worker can issue per millisecond (2^SequenceBits) and how
// many worker IDs the layout holds (2^WorkerBits).
func (l Layout) Capacity() (perMillis, workers int64) {
	return l.MaxSequence() + 1, l.MaxWorker() + 1
}

// MinRunway is how long a layout must still last when leaf-server starts: it refuses a
// layout whose End is less than a year away ([Layout.CheckRunway]), since the move to a new
// layout must be planned before the old one runs out and cannot repeat IDs (see
// [CheckLayoutChange]).
const MinRunway = 365 * 24 * time.Hour

// CheckRunway reports whether the layout lasts at least MinRunway past now. The error wraps
// ErrInvalidLayout and names the end date.
func (l Layout) CheckRunway(now time.Time) error {
	if left := l.End().Sub(now); left < MinRunway {
		return fmt.Errorf("%w: layout ends at %s, %.0f days from now; it must last at least a year (more time bits or an epoch closer to now)",
			ErrInvalidLayout, l.End().UTC().Format(time.RFC3339), left.Hours()/24)
	}
	return nil
}

// EpochMillis returns Epoch in Unix milliseconds.
func (l Layout) EpochMillis() int64 { return l.Epoch.UnixMilli() }

// End returns the first instant that the layout cannot encode: Epoch + 2^TimeBits ms. For
// DefaultLayout that is 2080-07-10T17:30:30.209Z.
func (l Layout) End() time.Time {
	return time.UnixMilli(l.EpochMillis() + l.MaxTime() + 1).UTC()
}

// MaxTime returns the largest value of the time field, 2^TimeBits-1, in milliseconds since Epoch.
func (l Layout) MaxTime() int64 { return 1<<l.TimeBits - 1 }

// MaxWorker returns the largest worker ID, 2^WorkerBits-1 (1023 for DefaultLayout).
func (l Layout) MaxWorker() int64 { return 1<<l.WorkerBits - 1 }

// MaxSequence returns the largest sequence number, 2^SequenceBits-1 (4095 for DefaultLayout).
func (l Layout) MaxSequence() int64 { return 1<<l.SequenceBits - 1 }

// CheckWorker reports whether worker fits the worker field: 0..MaxWorker(). It is all the
// validation a static worker ID (from configuration, a StatefulSet ordinal) gets; see
// Settings.WorkerID for the risk of static IDs. The error wraps ErrWorkerRange.
func (l Layout) CheckWorker(worker int64) error {
	if worker < 0 || worker > l.MaxWorker() {
		return fmt.Errorf("%w: %d not in [0, %d]", ErrWorkerRange, worker, l.MaxWorker())
	}
	return nil
}

// Compose packs a Unix-millisecond timestamp, a worker ID and a sequence number into an ID.
// It is pure: it never reads a clock. Errors: ErrTimeRange when ms is before Epoch or at or
// after End(), ErrWorkerRange, ErrSequenceRange.
func (l Layout) Compose(ms, worker, seq int64) (int64, error) {
	epoch := l.EpochMillis()
	delta := ms - epoch
	if ms < epoch || delta > l.MaxTime() {
		return 0, fmt.Errorf("%w: %d ms not in [%d, %d]", ErrTimeRange, ms, epoch, epoch+l.MaxTime())
	}
	if err := l.CheckWorker(worker); err != nil {
		return 0, err
	}
	if seq < 0 || seq > l.MaxSequence() {
		return 0, fmt.Errorf("%w: %d not in [0, %d]", ErrSequenceRange, seq, l.MaxSequence())
	}
	return l.compose(delta, worker, seq), nil
}

// compose packs fields that the caller has range-checked; delta is ms - epoch.
func (l Layout) compose(delta, worker, seq int64) int64 {
	return delta<<(l.WorkerBits+l.SequenceBits) | worker<<l.SequenceBits | seq
}

// ComposeTwitter packs an ID from Twitter's original fields: the worker ID is
// datacenter<<MachineBits | machine (with DefaultLayout, datacenter and machine are 0..31
// each). Errors: ErrDatacenterRange, ErrMachineRange, and Compose's.
func (l Layout) ComposeTwitter(ms, datacenter, machine, seq int64) (int64, error) {
	dcBits := max(l.WorkerBits-MachineBits, 0)
	if datacenter < 0 || datacenter > 1<<dcBits-1 {
		return 0, fmt.Errorf("%w: %d not in [0, %d]", ErrDatacenterRange, datacenter, 1<<dcBits-1)
	}
	machineMax := int64(1)<<min(MachineBits, l.WorkerBits) - 1
	if machine < 0 || machine > machineMax {
		return 0, fmt.Errorf("%w: %d not in [0, %d]", ErrMachineRange, machine, machineMax)
	}
	return l.Compose(ms, datacenter<<MachineBits|machine, seq)
}

// Parts are the fields of a decoded ID.
type Parts struct {
	// Millis is the Unix-millisecond timestamp (epoch already added back).
	Millis int64
	// Worker is the worker ID, 0..MaxWorker().
	Worker int64
	// Sequence is the sequence number within the millisecond, 0..MaxSequence().
	Sequence int64
	// Datacenter is Worker >> MachineBits, Twitter's 5-bit datacenter with DefaultLayout.
	Datacenter int64
	// Machine is the low MachineBits of Worker, Twitter's 5-bit machine ("worker") ID.
	Machine int64
}

// Time returns Millis as a time.Time in UTC.
func (p Parts) Time() time.Time { return time.UnixMilli(p.Millis).UTC() }

// Decompose splits an ID into its fields. It is pure and total: the bits above Bits() (the
// sign bit, and the unused high bits of a layout narrower than 63 bits) are ignored, so every
// int64 decodes, and for 0 <= id <= MaxID() Compose(Decompose(id)) == id.
func (l Layout) Decompose(id int64) Parts {
	worker := id >> l.SequenceBits & l.MaxWorker()
	return Parts{
		Millis:     id>>(l.WorkerBits+l.SequenceBits)&l.MaxTime() + l.EpochMillis(),
		Worker:     worker,
		Sequence:   id & l.MaxSequence(),
		Datacenter: worker >> MachineBits,
		Machine:    worker & (1<<MachineBits - 1),
	}
}

// defaultLayout is DefaultLayout(), built once for the package-level functions. Never modified.
var defaultLayout = DefaultLayout()

// Compose is DefaultLayout().Compose.
func Compose(ms, worker, seq int64) (int64, error) { return defaultLayout.Compose(ms, worker, seq) }

// ComposeTwitter is DefaultLayout().ComposeTwitter: 5-bit datacenter, 5-bit machine.
func ComposeTwitter(ms, datacenter, machine, seq int64) (int64, error) {
	return defaultLayout.ComposeTwitter(ms, datacenter, machine, seq)
}

// Decompose is DefaultLayout().Decompose.
func Decompose(id int64) Parts { return defaultLayout.Decompose(id) }
