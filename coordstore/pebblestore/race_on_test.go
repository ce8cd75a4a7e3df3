//go:build race

package pebblestore_test

// raceEnabled reports a build with the race detector, under which the
// crash test's child processes and reopen checks run about twenty times
// slower.
const raceEnabled = true
