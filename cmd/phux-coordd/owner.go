package main

import (
	"log/slog"

	"github.com/phuxcoord/coord/coordserver"
)

// embedOwner registers the terminal owner that executes Runs. The server
// kit does not serve Runs yet on this branch (coordserver has no owner
// port): when the exec terminal owner (examples/execowner) and the owner
// port (coordserver/owner.go) are merged, this is where the daemon
// registers it, so that START_RUN spawns real processes. Until then the
// daemon serves Objectives, operations, snapshots and subscriptions only.
func embedOwner(cfg *coordserver.Config, stateDir string, log *slog.Logger) error {
	_, _, _ = cfg, stateDir, log
	return nil
}
