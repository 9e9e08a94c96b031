//go:build race

package faults

// raceEnabled builds leaf-server with -race too, so the servers' races under
// faults are caught as well.
const raceEnabled = true
