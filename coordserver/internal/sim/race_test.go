//go:build race

package sim

// raceEnabled shortens the short run under the race detector, which runs
// the simulation about ten times slower.
const raceEnabled = true
