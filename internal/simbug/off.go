//go:build !simbugs

package simbug

// On reports whether b is put back: never, without the build tag simbugs.
func On(Bug) bool { return false }
