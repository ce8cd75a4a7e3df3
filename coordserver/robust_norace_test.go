//go:build !race

package coordserver_test

// raceEnabled reports a -race build of the test binary.
const raceEnabled = false
