//go:build race

package execowner_test

const raceEnabled = true
