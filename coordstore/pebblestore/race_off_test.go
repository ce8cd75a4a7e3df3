//go:build !race

package pebblestore_test

const raceEnabled = false
