//go:build !phuxdefects

package main

import (
	"flag"
	"log/slog"

	"github.com/phuxcoord/coord/coordserver"
)

// registerCheckHooks registers nothing: the conformance hooks exist only
// in a phuxdefects test build (checkhooks_on.go).
func registerCheckHooks(*flag.FlagSet, *serveOpts) {}

func applyCheckHooks(*coordserver.Config, *serveOpts, *slog.Logger) error { return nil }
