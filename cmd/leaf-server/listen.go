package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// listen binds addr for the setting flagName (listen, pprof-listen), whose
// value came from source (parseConfig's sources: "default", "flag", "env
// LEAF_LISTEN", "file … (server.port)"). A failure names the address, the
// setting and where its value came from; an address in use also says what
// to do (issue 23 item 5), where net.Listen's error says only "bind: address
// already in use".
func listen(addr, flagName, source string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	setting := "--" + flagName
	if source != "" && source != "flag" {
		setting += " from " + source
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s (%s): the address is in use by another process (another leaf-server?); "+
			"stop that process or choose another address with --%s: %w", addr, setting, flagName, err)
	}
	return nil, fmt.Errorf("listen on %s (%s): %w", addr, setting, err)
}
