//go:build phuxdefects

package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordserver"
)

// The in-process verbs of phux-coordcheck's hook protocol
// (docs/conformance.md, "Hooks") in a phuxdefects test build: the test
// harness serves restart and expire-lease itself (they act on the
// process and on the witness) and forwards expire-cursors here, since
// only the daemon's own clock can expire its leases.

func registerCheckHooks(fl *flag.FlagSet, o *serveOpts) {
	fl.StringVar(&o.checkHooks, "check-hooks", "", "TEST BUILD ONLY: serve phux-coordcheck's in-process hooks (expire-cursors) on unix:PATH")
}

// applyCheckHooks puts the coordinator on a clock the hook can move
// forward (coordtest's ExpireCursors does the same) and serves the hook.
func applyCheckHooks(cfg *coordserver.Config, o *serveOpts, log *slog.Logger) error {
	path, ok := strings.CutPrefix(o.checkHooks, "unix:")
	if o.checkHooks == "" {
		return nil
	}
	if !ok || path == "" {
		return refuse(exitUsage, "--check-hooks: want unix:PATH")
	}
	var skew atomic.Int64
	cfg.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	l, err := coordserver.ListenUnix(path)
	if err != nil {
		return refuse(exitConfig, "--check-hooks: %v", netCause(err))
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(io.LimitReader(c, 64)).ReadString('\n')
			switch strings.TrimSpace(line) {
			case "expire-cursors":
				skew.Add(int64(coordserver.SnapshotLease + time.Second))
				log.Warn("check hook: the coordinator's clock moved past every snapshot and replay lease")
				fmt.Fprintln(c, "ok")
			default:
				fmt.Fprintln(c, "unsupported")
			}
			c.Close()
		}
	}()
	return nil
}
