//go:build phuxdefects

package defect

import "os"

// Built reports whether this binary can inject defects.
const Built = true

var active = os.Getenv(EnvVar)

// On reports whether the named defect is injected (PHUX_DEFECT).
func On(name string) bool { return active == name }
