//go:build !phuxdefects

package defect

// Built reports whether this binary can inject defects.
const Built = false

// On reports whether the named defect is injected: never, in this build.
func On(string) bool { return false }
