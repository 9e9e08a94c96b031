package api

import (
	"net"
	"net/http"
)

// clientAddr is the address the per-client miss-lookup limit of segment
// mode counts against (segment.Config.MissLookupRate): the IP of the TCP
// peer, r.RemoteAddr without its port. Forwarded headers (X-Forwarded-For,
// X-Real-IP) are never read: any client can set them, and a flood could
// then spend the limit of other clients or make up a fresh client per
// request. Behind a proxy every client is the proxy.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
