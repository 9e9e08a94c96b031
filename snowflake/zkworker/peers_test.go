package zkworker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/zktest"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/zkworker"
)

// TestPeerClockJava: a Java Leaf peer (no live node) that uploaded lately counts with its node
// timestamp: 30 s ahead refuses the start and names it, 2 s ahead starts; an upload older than
// three heartbeat intervals is a dead peer and does not count.
func TestPeerClockJava(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	tests := []struct {
		name    string
		ahead   time.Duration
		age     time.Duration // how long ago the peer uploaded
		wantErr bool
	}{
		{name: "30 s ahead", ahead: 30 * time.Second, wantErr: true},
		{name: "30 s behind", ahead: -30 * time.Second, wantErr: true},
		{name: "2 s ahead", ahead: 2 * time.Second},
		{name: "30 s ahead, dead", ahead: 30 * time.Second, age: 800 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := zktest.Name(t, addr)
			conn := zktest.Conn(t, addr)
			leafNode(t, conn, name, "10.9.9.9:8080", time.Now().Add(tt.ahead).UnixMilli())
			time.Sleep(tt.age)
			o := options(t, addr, name, "7001")
			o.MaxPeerClockSkew = 10 * time.Second
			o.HeartbeatInterval = 200 * time.Millisecond // dead after 600 ms without an upload
			w, err := zkworker.Claim(context.Background(), o)
			if err == nil {
				defer w.Close(context.Background())
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Claim() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, snowflake.ErrPeerClockSkew) || !strings.Contains(err.Error(), "10.9.9.9:8080") {
				t.Fatalf("Claim() = %v, want %v naming 10.9.9.9:8080", err, snowflake.ErrPeerClockSkew)
			}
			// Refused: no live node left behind, so a fixed clock can start at once.
			if ok, _, _ := conn.Exists("/snowflake/" + name + "/live/1"); ok {
				t.Error("the refused claim left its live node")
			}
			o.MaxPeerClockSkew = 0 // the check off
			claim(t, o)
		})
	}
}

// TestPeerClockLeafGo: a live leaf-go peer reports its clock in its live node; a host 30 s
// behind it refuses to start, 2 s behind starts.
func TestPeerClockLeafGo(t *testing.T) {
	t.Parallel()
	addr := zktest.Addr(t)
	for _, ahead := range []time.Duration{30 * time.Second, 2 * time.Second} {
		t.Run(ahead.String(), func(t *testing.T) {
			name := zktest.Name(t, addr)
			po := options(t, addr, name, "7001")
			po.Clock = newOffsetClock(time.Now().Add(ahead))
			claim(t, po)
			o := options(t, addr, name, "7002")
			o.MaxPeerClockSkew = 10 * time.Second
			w, err := zkworker.Claim(context.Background(), o)
			if err == nil {
				defer w.Close(context.Background())
			}
			if ahead < 10*time.Second {
				if err != nil {
					t.Fatalf("Claim() with a peer %v ahead = %v, want nil", ahead, err)
				}
				return
			}
			if !errors.Is(err, snowflake.ErrPeerClockSkew) || !strings.Contains(err.Error(), "127.0.0.1:7001") {
				t.Fatalf("Claim() with a peer %v ahead = %v, want %v naming 127.0.0.1:7001", ahead, err, snowflake.ErrPeerClockSkew)
			}
		})
	}
}
