package snowflake_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

func TestCheckLayoutChange(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	base := snowflake.DefaultLayout()
	with := func(epoch time.Duration, timeBits, workerBits, sequenceBits int) snowflake.Layout {
		return snowflake.Layout{Epoch: base.Epoch.Add(epoch), TimeBits: timeBits, WorkerBits: workerBits, SequenceBits: sequenceBits}
	}
	soon := now.Add(3 * time.Second) // a mark one high-water window ahead
	tests := []struct {
		name      string
		old, next snowflake.Layout
		floor     time.Time
		wantErr   error
	}{
		{name: "same layout", old: base, next: base, floor: soon},
		{name: "same layout, epoch in another time zone", old: base, next: snowflake.Layout{Epoch: base.Epoch.In(time.FixedZone("CST", 8*3600)), TimeBits: 41, WorkerBits: 10, SequenceBits: 12}, floor: soon},
		{name: "same layout without a mark", old: base, next: base},
		{name: "epoch 2 s later", old: base, next: with(2*time.Second, 41, 10, 12), floor: soon, wantErr: snowflake.ErrLayoutChange},
		{name: "epoch 1 ms later", old: base, next: with(time.Millisecond, 41, 10, 12), wantErr: snowflake.ErrLayoutChange},
		{name: "epoch a day earlier", old: base, next: with(-24*time.Hour, 41, 10, 12), floor: soon},
		{name: "back to the later epoch", old: with(-24*time.Hour, 41, 10, 12), next: base, floor: soon, wantErr: snowflake.ErrLayoutChange},
		{name: "epoch 1 min earlier, mark 1 h ahead", old: base, next: with(-time.Minute, 41, 10, 12), floor: now.Add(time.Hour), wantErr: snowflake.ErrLayoutChange},
		{name: "epoch 1 min earlier, mark 3 s ahead", old: base, next: with(-time.Minute, 41, 10, 12), floor: soon},
		{name: "worker bits 10 to 5", old: base, next: with(0, 41, 5, 17), floor: soon, wantErr: snowflake.ErrLayoutChange},
		{name: "sequence bits 12 to 11", old: base, next: with(0, 41, 11, 11), floor: soon, wantErr: snowflake.ErrLayoutChange},
		{name: "41/10/12 to 40/11/12", old: base, next: with(0, 40, 11, 12), floor: soon},
		{name: "41/10/12 to 40/10/13", old: base, next: with(0, 40, 10, 13), floor: soon},
		{name: "41/10/12 to 42/9/12", old: base, next: with(0, 42, 9, 12), floor: soon, wantErr: snowflake.ErrLayoutChange},
		{name: "old epoch after the mark issued nothing", old: snowflake.Layout{Epoch: now.Add(time.Hour), TimeBits: 41, WorkerBits: 10, SequenceBits: 12}, next: base, floor: soon},
		{name: "old layout ran out", old: snowflake.Layout{Epoch: now.Add(-60 * 24 * time.Hour), TimeBits: 32, WorkerBits: 10, SequenceBits: 21}, next: base, floor: soon, wantErr: snowflake.ErrLayoutChange},
		{name: "old widths damaged", old: with(0, -1, 10, 12), next: base, wantErr: snowflake.ErrInvalidLayout},
		{name: "new widths invalid", old: base, next: with(0, 41, 10, 13), wantErr: snowflake.ErrInvalidLayout},
		// Issue 22 item 3: a narrower layout makes smaller IDs, which may
		// repeat the 63-bit ones already issued.
		{name: "to 53 bits, same epoch", old: base, next: with(0, 41, 4, 8), wantErr: snowflake.ErrLayoutChange},
		{name: "new epoch in the future", old: base, next: snowflake.Layout{Epoch: now.Add(time.Hour), TimeBits: 41, WorkerBits: 10, SequenceBits: 12}, wantErr: snowflake.ErrTimeRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := snowflake.CheckLayoutChange(tt.old, tt.next, tt.floor, now)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("CheckLayoutChange(%v, %v) = %v, want %v", tt.old, tt.next, err, tt.wantErr)
			}
		})
	}
}
