package snowflake_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

func TestCompose(t *testing.T) {
	const epoch = snowflake.DefaultEpochMillis
	tests := []struct {
		name            string
		ms, worker, seq int64
		want            int64
		wantErr         error
	}{
		{name: "epoch", ms: epoch, want: 0},
		{name: "one second, worker 33", ms: epoch + 1000, worker: 33, want: 4194439168},
		{name: "contract §6 example 2", ms: 1700000000000, worker: 237, seq: 4095, want: 1724551110457221119},
		{name: "last millisecond", ms: epoch + 1<<41 - 1, worker: 1023, seq: 4095, want: 1<<63 - 1},
		{name: "before epoch", ms: epoch - 1, wantErr: snowflake.ErrTimeRange},
		{name: "after end", ms: epoch + 1<<41, wantErr: snowflake.ErrTimeRange},
		{name: "worker 1024", ms: epoch, worker: 1024, wantErr: snowflake.ErrWorkerRange},
		{name: "worker -1", ms: epoch, worker: -1, wantErr: snowflake.ErrWorkerRange},
		{name: "sequence 4096", ms: epoch, seq: 4096, wantErr: snowflake.ErrSequenceRange},
		{name: "sequence -1", ms: epoch, seq: -1, wantErr: snowflake.ErrSequenceRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := snowflake.Compose(tt.ms, tt.worker, tt.seq)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Compose(%d, %d, %d) = %d, %v, want %d, %v", tt.ms, tt.worker, tt.seq, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestComposeTwitter(t *testing.T) {
	tests := []struct {
		name    string
		give    [4]int64 // ms, datacenter, machine, sequence
		want    int64
		wantErr error
	}{
		{name: "contract §6 example 1", give: [4]int64{1288834975657, 1, 1, 0}, want: 4194439168},
		{name: "contract §6 example 2", give: [4]int64{1700000000000, 7, 13, 4095}, want: 1724551110457221119},
		{name: "datacenter 32", give: [4]int64{1700000000000, 32, 0, 0}, wantErr: snowflake.ErrDatacenterRange},
		{name: "machine 32", give: [4]int64{1700000000000, 0, 32, 0}, wantErr: snowflake.ErrMachineRange},
		{name: "machine -1", give: [4]int64{1700000000000, 0, -1, 0}, wantErr: snowflake.ErrMachineRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := snowflake.ComposeTwitter(tt.give[0], tt.give[1], tt.give[2], tt.give[3])
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("ComposeTwitter(%v) = %d, %v, want %d, %v", tt.give, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestLayoutValidate(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	def := snowflake.DefaultLayout()
	with := func(f func(*snowflake.Layout)) snowflake.Layout { l := def; f(&l); return l }
	tests := []struct {
		name    string
		give    snowflake.Layout
		wantErr bool
	}{
		{name: "default", give: def},
		{name: "sonyflake-like 39/16/8", give: with(func(l *snowflake.Layout) { l.TimeBits, l.WorkerBits, l.SequenceBits = 39, 16, 8 })},
		{name: "sum 62", give: with(func(l *snowflake.Layout) { l.TimeBits = 40 })},
		{name: "53 bits for JavaScript 41/4/8", give: with(func(l *snowflake.Layout) { l.TimeBits, l.WorkerBits, l.SequenceBits = 41, 4, 8 })},
		{name: "sum 64", give: with(func(l *snowflake.Layout) { l.TimeBits = 42 }), wantErr: true},
		{name: "time 31", give: with(func(l *snowflake.Layout) { l.TimeBits, l.WorkerBits = 31, 20 }), wantErr: true},
		{name: "worker 0", give: with(func(l *snowflake.Layout) { l.TimeBits, l.WorkerBits = 51, 0 }), wantErr: true},
		{name: "sequence 0", give: with(func(l *snowflake.Layout) { l.TimeBits, l.SequenceBits = 53, 0 }), wantErr: true},
		{name: "negative width", give: with(func(l *snowflake.Layout) { l.TimeBits, l.WorkerBits = 52, -1 }), wantErr: true},
		{name: "epoch in the future", give: with(func(l *snowflake.Layout) { l.Epoch = now.Add(time.Millisecond) }), wantErr: true},
		{name: "epoch now", give: with(func(l *snowflake.Layout) { l.Epoch = now }), wantErr: true},
		{name: "zero epoch", give: with(func(l *snowflake.Layout) { l.Epoch = time.Time{} }), wantErr: true},
		{name: "ran out (32 bits from 2010)", give: with(func(l *snowflake.Layout) { l.TimeBits, l.WorkerBits, l.SequenceBits = 32, 19, 12 }), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate(now)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, snowflake.ErrInvalidLayout)) {
				t.Fatalf("Validate() = %v, want error %v (ErrInvalidLayout)", err, tt.wantErr)
			}
		})
	}
}

// TestLayout53 checks a layout JavaScript can hold (issue 22 item 3): its
// largest ID is Number.MAX_SAFE_INTEGER, every ID it composes is at most
// that, and decoding round-trips.
func TestLayout53(t *testing.T) {
	l := snowflake.DefaultLayout()
	l.TimeBits, l.WorkerBits, l.SequenceBits = 41, 4, 8
	if got, want := l.Bits(), 53; got != want {
		t.Errorf("Bits() = %d, want %d", got, want)
	}
	if got, want := l.MaxID(), int64(9007199254740991); got != want {
		t.Errorf("MaxID() = %d, want %d (2^53-1)", got, want)
	}
	if perMs, workers := l.Capacity(); perMs != 256 || workers != 16 {
		t.Errorf("Capacity() = %d, %d, want 256, 16", perMs, workers)
	}
	last := l.End().UnixMilli() - 1
	id, err := l.Compose(last, l.MaxWorker(), l.MaxSequence())
	if err != nil || id != l.MaxID() {
		t.Fatalf("Compose(last ms, max worker, max sequence) = %d, %v, want %d", id, err, l.MaxID())
	}
	for _, give := range []int64{0, 1, 1<<52 + 12345, l.MaxID()} {
		p := l.Decompose(give)
		got, err := l.Compose(p.Millis, p.Worker, p.Sequence)
		if err != nil || got != give {
			t.Errorf("Compose(Decompose(%d)) = %d, %v", give, got, err)
		}
	}
	d := l.Describe(l.MaxID())
	if d.Bits.Sign != "0" || d.Bits.Unused != "0000000000" || len(d.Bits.Time) != 41 || len(d.Bits.Worker) != 4 || len(d.Bits.Sequence) != 8 {
		t.Errorf("Describe(MaxID()).Bits = %+v, want sign 0, 10 unused zero bits, 41/4/8", d.Bits)
	}
	if d.Bits.Sign+d.Bits.Unused+d.Bits.Time+d.Bits.Worker+d.Bits.Sequence != d.Bits.All {
		t.Errorf("Describe bits do not add up to All: %+v", d.Bits)
	}
	if d.Layout.IDBits != 53 || d.Layout.MaxID != "9007199254740991" {
		t.Errorf("Describe layout = %+v, want idBits 53, maxId 9007199254740991", d.Layout)
	}
	if def := snowflake.DefaultLayout().Describe(1); def.Bits.Unused != "" || len(def.Bits.Time) != 41 {
		t.Errorf("DefaultLayout Describe bits = %+v, want no unused bits", def.Bits)
	}
}

func TestLayoutCheckRunway(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	l := snowflake.Layout{Epoch: now.Add(-10 * 24 * time.Hour), TimeBits: 32, WorkerBits: 10, SequenceBits: 12}
	if err := l.Validate(now); err != nil {
		t.Fatalf("Validate() = %v; a layout ending in 40 days is valid, only short", err)
	}
	err := l.CheckRunway(now)
	if !errors.Is(err, snowflake.ErrInvalidLayout) || !strings.Contains(err.Error(), "at least a year") {
		t.Errorf("CheckRunway(40 days left) = %v, want ErrInvalidLayout saying at least a year", err)
	}
	l.TimeBits = 35 // 2^35 ms: about 397 days
	if err := l.CheckRunway(now); err != nil {
		t.Errorf("CheckRunway(387 days left) = %v, want nil", err)
	}
	if err := snowflake.DefaultLayout().CheckRunway(now); err != nil {
		t.Errorf("DefaultLayout().CheckRunway = %v, want nil", err)
	}
}

func TestLayoutLimits(t *testing.T) {
	l := snowflake.DefaultLayout()
	if got, want := l.MaxWorker(), int64(1023); got != want {
		t.Errorf("MaxWorker() = %d, want %d", got, want)
	}
	if got, want := l.MaxSequence(), int64(4095); got != want {
		t.Errorf("MaxSequence() = %d, want %d", got, want)
	}
	if got, want := l.End(), time.UnixMilli(snowflake.DefaultEpochMillis+1<<41); !got.Equal(want) {
		t.Errorf("End() = %v, want %v", got, want)
	}
	if err := l.CheckWorker(1023); err != nil {
		t.Errorf("CheckWorker(1023) = %v, want nil", err)
	}
	if err := l.CheckWorker(1024); !errors.Is(err, snowflake.ErrWorkerRange) {
		t.Errorf("CheckWorker(1024) = %v, want %v", err, snowflake.ErrWorkerRange)
	}
}

func FuzzComposeDecompose(f *testing.F) {
	f.Add(int64(1288834975657), int64(33), int64(0), uint8(41), uint8(10))
	f.Add(int64(1700000000000), int64(237), int64(4095), uint8(41), uint8(10))
	f.Add(int64(snowflake.DefaultEpochMillis), int64(0), int64(0), uint8(39), uint8(16))
	f.Add(int64(1<<62), int64(-1), int64(1<<40), uint8(61), uint8(1))
	f.Fuzz(func(t *testing.T, ms, worker, seq int64, timeBits, workerBits uint8) {
		l := snowflake.DefaultLayout()
		l.TimeBits = 32 + int(timeBits)%30    // 32..61
		l.WorkerBits = 1 + int(workerBits)%20 // 1..20
		l.SequenceBits = 63 - l.TimeBits - l.WorkerBits
		if l.SequenceBits < 1 || l.SequenceBits > 22 {
			t.Skip()
		}
		id, err := l.Compose(ms, worker, seq)
		if err != nil {
			// Every rejection names a field that really is out of range.
			ok := ms < l.EpochMillis() || ms-l.EpochMillis() > l.MaxTime() ||
				worker < 0 || worker > l.MaxWorker() || seq < 0 || seq > l.MaxSequence()
			if !ok {
				t.Fatalf("Compose(%d, %d, %d) = %v for in-range fields", ms, worker, seq, err)
			}
			return
		}
		if id < 0 {
			t.Fatalf("Compose(%d, %d, %d) = %d, want >= 0", ms, worker, seq, id)
		}
		p := l.Decompose(id)
		if p.Millis != ms || p.Worker != worker || p.Sequence != seq {
			t.Fatalf("Decompose(Compose(%d, %d, %d)) = %+v", ms, worker, seq, p)
		}
		if p.Datacenter<<snowflake.MachineBits|p.Machine != worker {
			t.Fatalf("Decompose(%d) = %+v: datacenter/machine do not rebuild worker %d", id, p, worker)
		}
		// And the other way: every non-negative int64 decodes to fields that compose back to it.
		raw := ms & (1<<63 - 1)
		q := l.Decompose(raw)
		back, err := l.Compose(q.Millis, q.Worker, q.Sequence)
		if err != nil || back != raw {
			t.Fatalf("Compose(Decompose(%d)) = %d, %v, want %d", raw, back, err, raw)
		}
	})
}
