package snowflake

import (
	"errors"
	"fmt"
	"strconv"
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
// says how far this host is ahead of or behind its peers ("this host is 30 s ahead of its
// peers") and names every peer with its offset. No peers, or max ≤ 0 (the check turned
// off), returns nil.
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
		parts = append(parts, p.Name+" "+relative(off, "ahead", "behind"))
	}
	mean := sum / time.Duration(len(peers))
	if mean > max || mean < -max {
		// mean > 0: the peers are ahead, so this host is behind them.
		return fmt.Errorf("%w: this host is %s its peers on average (allowed ±%v; peers: %s); "+
			"fix this host's clock (NTP) or raise --max-peer-clock-skew (0 turns the check off)",
			ErrPeerClockSkew, relative(-mean, "ahead of", "behind"), max, strings.Join(parts, ", "))
	}
	return nil
}

// relative says d, rounded to the millisecond, in seconds without its sign,
// followed by ahead when d > 0 and by behind otherwise: "30 s ahead of",
// "0.25 s behind".
func relative(d time.Duration, ahead, behind string) string {
	word := ahead
	if d <= 0 {
		word, d = behind, -d
	}
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64) + " s " + word
}
