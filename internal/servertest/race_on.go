//go:build race

package servertest

// Race is true when this test binary runs with the race detector; Run then
// builds leaf-server with -race too, so the server's races are caught.
const Race = true
