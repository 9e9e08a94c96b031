//go:build race

package main

// raceEnabled makes the end-to-end tests build leaf-server with -race too.
const raceEnabled = true
