package main

import (
	"context"
	"flag"
	"os"
	"runtime"

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
		if f, ok := e.stdin.(*os.File); ok && f == os.Stdin && os.Getenv("GOMAXPROCS") == "" {
			// The process is the bridge of one stream, each request a
			// few microseconds of work between waits: with one P a
			// request is handed from goroutine to goroutine on the
			// thread that read it, where a second P would wake a
			// second thread to look for it (a context switch or two a
			// request). Not when run in-process on another reader
			// (tests): the setting is the whole process's.
			runtime.GOMAXPROCS(1)
		}
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
