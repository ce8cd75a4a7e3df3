//go:build race

package coordclient_test

// raceOn reports whether the race detector is on (it allocates on
// synchronization, so allocation counts are not meaningful).
const raceOn = true
