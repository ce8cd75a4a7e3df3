//go:build !race

package main

// raceEnabled reports a -race build of the test binary.
const raceEnabled = false
