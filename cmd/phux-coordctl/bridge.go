package main

import (
	"context"
	"flag"

	"github.com/phuxcoord/coord/coordclient/coordffi"
)

// bridgeCommand is `phux-coordctl bridge`: the stdio bridge for plugins
// and agents that cannot load libphuxcoord (docs/ffi.md).
func bridgeCommand() *command {
	return &command{name: "bridge", setup: setupBridge,
		summary: "Serve JSON-RPC 2.0 on standard input and output with LSP-style Content-Length framing.\nRequests open clients (from a JSON config), run commands and reads and open Mirrors, whose events,\nGAPs and authority changes arrive as \"mirror.event\" notifications; every shape is the coordjson\nprojection (schema: the \"schema\" method). It runs until standard input ends; see docs/ffi.md."}
}

func setupBridge(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, _ []string) error {
		done := make(chan error, 1)
		growPipe(e.stdout)
		in, out := pollableInput(e.stdin), pollableOutput(e.stdout)
		go func() { done <- coordffi.Serve(ctx, in, out) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			// An interrupt: the read of standard input cannot be
			// cancelled; the process exits, closing every connection.
			return nil
		}
	}
}
