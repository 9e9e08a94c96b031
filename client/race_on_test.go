//go:build race

package client_test

// raceEnabled makes TestMain build leaf-server with -race too.
const raceEnabled = true
