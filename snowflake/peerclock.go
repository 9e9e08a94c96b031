package snowflake

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Peer is what a worker-ID source knows of another live holder's clock: the wall-clock time
// the peer last reported (Leaf's timestamp upload every 3 s, a lease row's heartbeat, an etcd
// key) and the local time at which that report was read. Name identifies the peer for an
// operator (ip:port, worker ID, key).
type Peer struct {
	Name     string    // who reported, for the error message
	Reported time.Time // the peer's own clock when it reported
	ReadAt   time.Time // the local clock when the report was read
}

// ErrPeerClockSkew is returned (wrapped) by [CheckPeerClock] when the local clock is off the
// mean of the live peers' clocks by more than the allowed skew.
var ErrPeerClockSkew = errors.New("snowflake: local clock is off the live peers' clocks")

// CheckPeerClock compares the local clock with the clocks the live peers reported: each
// peer's offset is Reported − ReadAt (positive when the peer is ahead of us; a report read a
// while ago is still compared at the moment it was read, so reporting intervals do not count
// as skew). When |mean offset| > max it returns an error wrapping [ErrPeerClockSkew] that
// names every peer with its offset. No peers, or max ≤ 0 (the check turned off), returns nil.
//
// The rule is Twitter snowflake's 2010 start check (refuse when more than 10 s off the mean
// of the peers), also described in Leaf's design article and missing from Leaf's code
// (Meituan-Dianping/Leaf#98).
func CheckPeerClock(peers []Peer, max time.Duration) error {
	if max <= 0 || len(peers) == 0 {
		return nil
	}
	var sum time.Duration
	parts := make([]string, 0, len(peers))
	for _, p := range peers {
		off := p.Reported.Sub(p.ReadAt)
		sum += off
		parts = append(parts, fmt.Sprintf("%s %+v", p.Name, off.Round(time.Millisecond)))
	}
	mean := sum / time.Duration(len(peers))
	if mean > max || mean < -max {
		return fmt.Errorf("%w: the peers are on average %v ahead of this host (allowed ±%v; peers: %s); "+
			"fix this host's clock (NTP) or raise --max-peer-clock-skew (0 turns the check off)",
			ErrPeerClockSkew, mean.Round(time.Millisecond), max, strings.Join(parts, ", "))
	}
	return nil
}
