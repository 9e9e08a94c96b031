// Package faultproxy puts a real TCP proxy (Shopify's toxiproxy, run
// in-process) between a test's server and its database, so tests can cut,
// slow down and restore the connection without mocking any driver.
package faultproxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy forwards one loopback port to an upstream address. Not safe for
// concurrent calls of Cut/Restore/Delay from several goroutines.
type Proxy struct {
	p *toxiproxy.Proxy
}

// Start listens on 127.0.0.1 (a free port) and forwards to upstream
// (host:port). The proxy is stopped when the test ends.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "db", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("faultproxy: start proxy to %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{p: p}
}

// Addr is the proxy's listen address, host:port; it stays the same across
// Cut and Restore.
func (x *Proxy) Addr() string { return x.p.Listen }

// Cut closes the listener and every open connection: the database looks down.
func (x *Proxy) Cut() { x.p.Stop() }

// Restore listens again on the same address.
func (x *Proxy) Restore(t testing.TB) {
	t.Helper()
	var err error
	for i := 0; i < 50; i++ { // the port may linger for a moment after Cut
		if err = x.p.Start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("faultproxy: restore %s: %v", x.Addr(), err)
}

// Delay adds d of latency to every chunk sent back by the database (until
// ClearDelay).
func (x *Proxy) Delay(t testing.TB, d time.Duration) {
	t.Helper()
	js := fmt.Sprintf(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds())
	if _, err := x.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("faultproxy: add latency: %v", err)
	}
}

// ClearDelay removes the latency added by Delay.
func (x *Proxy) ClearDelay(t testing.TB) { x.Clear(t) }

// Clear removes every toxic (Delay, Reset, Blackhole): the connection is
// healthy again. Connections a Blackhole stalled stay stalled until one side
// gives up; new ones work.
func (x *Proxy) Clear(t testing.TB) {
	t.Helper()
	x.p.Toxics.ResetToxics(t.Context())
}

// Reset makes every connection, open or new, end with a TCP RST (toxiproxy's
// reset_peer with timeout 0) instead of a clean close, until Clear.
func (x *Proxy) Reset(t testing.TB) {
	t.Helper()
	x.add(t, `{"name":"reset_up","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`)
}

// Blackhole makes every connection, open or new, swallow data silently and
// never answer (toxiproxy's timeout toxic with timeout 0), until Clear: the
// database looks hung rather than down.
func (x *Proxy) Blackhole(t testing.TB) {
	t.Helper()
	x.add(t, `{"name":"blackhole_up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
	x.add(t, `{"name":"blackhole_down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
}

func (x *Proxy) add(t testing.TB, js string) {
	t.Helper()
	if _, err := x.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("faultproxy: add toxic %s: %v", js, err)
	}
}
