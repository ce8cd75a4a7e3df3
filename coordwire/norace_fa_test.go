//go:build !race

package coordwire

// faRace reports whether the race detector is on (it makes sync.Pool
// drop items, so allocation counts are not meaningful).
const faRace = false
