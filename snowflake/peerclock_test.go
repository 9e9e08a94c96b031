package snowflake

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckPeerClock(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	peer := func(name string, ahead time.Duration) Peer {
		return Peer{Name: name, Reported: now.Add(ahead), ReadAt: now}
	}
	cases := []struct {
		name  string
		peers []Peer
		max   time.Duration
		fail  bool
		says  []string // what the refusal says, in order
	}{
		{"no peers", nil, 10 * time.Second, false, nil},
		{"turned off", []Peer{peer("a", time.Hour)}, 0, false, nil},
		{"2s ahead", []Peer{peer("a", 2*time.Second)}, 10 * time.Second, false, nil},
		{"peer 30s ahead", []Peer{peer("a", 30*time.Second)}, 10 * time.Second, true,
			[]string{"this host is 30 s behind its peers on average", "peers: a 30 s ahead"}},
		{"peer 30s behind", []Peer{peer("a", -30*time.Second)}, 10 * time.Second, true,
			[]string{"this host is 30 s ahead of its peers on average", "peers: a 30 s behind"}},
		{"peers 12.5s behind on average", []Peer{peer("a", -20*time.Second), peer("b", -5*time.Second)}, 10 * time.Second, true,
			[]string{"this host is 12.5 s ahead of its peers on average", "a 20 s behind, b 5 s behind"}},
		{"mean inside", []Peer{peer("a", 15*time.Second), peer("b", -10*time.Second)}, 10 * time.Second, false, nil},
		{"exactly max", []Peer{peer("a", 10*time.Second)}, 10 * time.Second, false, nil},
		{"read late", []Peer{{Name: "a", Reported: now, ReadAt: now.Add(3 * time.Second)}}, 10 * time.Second, false, nil},
	}
	for _, c := range cases {
		err := CheckPeerClock(c.peers, c.max)
		if (err != nil) != c.fail {
			t.Errorf("%s: err = %v, want failure %v", c.name, err, c.fail)
			continue
		}
		if err != nil && (!errors.Is(err, ErrPeerClockSkew) || !strings.Contains(err.Error(), c.peers[0].Name)) {
			t.Errorf("%s: error %q does not wrap ErrPeerClockSkew or name the peer", c.name, err)
		}
		for _, want := range c.says {
			if err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", c.name, err, want)
			}
		}
	}
}
