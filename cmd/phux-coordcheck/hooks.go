package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// The hook protocol (docs/conformance.md, "Hooks") lets an
// implementation's test build cooperate in the requirements a black box
// cannot provoke: a restart, an expired lease, expired cursors. It is
// served on a Unix socket named by --hooks unix:PATH; each request is one
// connection carrying one line
//
//	VERB\n
//
// answered with one line and a close:
//
//	ok\n                  the effect has happened (a restart: the new
//	                      incarnation accepts connections)
//	unsupported\n         the implementation does not offer VERB
//	error: REASON\n       VERB failed
//
// The verbs of version 1 are listed in hookVerbs.
const hookProtocol = "phux-coordcheck-hooks/1"

// hookVerbs are the verbs of the hook protocol, with what each must do.
var hookVerbs = map[string]string{
	"restart":        "stop the coordinator gracefully (connections close, live subscriptions get GAP EPOCH_CHANGED) and activate it again: a new incarnation, a higher epoch and activation sequence, the same CoordinatorId and durable state",
	"expire-cursors": "make every open snapshot and replay lease expire now (their next NEXT is CURSOR_INVALID)",
	"expire-lease":   "make the activation lease expire (or revoke it at the witness): the coordinator fences itself, refusing commands with AUTHORITY_FENCED, and closes its connections; answer once it has fenced",
}

// errHookUnsupported is the answer "unsupported" or no --hooks at all.
var errHookUnsupported = errors.New("hook not offered by the implementation")

// hooks is the client of an implementation's hook socket.
type hooks struct {
	path    string
	timeout time.Duration
}

// call sends one verb and waits for its answer.
func (h *hooks) call(ctx context.Context, verb string) error {
	if h == nil || h.path == "" {
		return errHookUnsupported
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", h.path)
	if err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, verb+"\n"); err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(c, 1024)).ReadString('\n')
	if err != nil {
		return fmt.Errorf("hooks: %s: no answer: %w", verb, err)
	}
	line = strings.TrimSpace(line)
	switch {
	case line == "ok":
		return nil
	case line == "unsupported":
		return errHookUnsupported
	case strings.HasPrefix(line, "error: "):
		return fmt.Errorf("hooks: %s: %s", verb, strings.TrimPrefix(line, "error: "))
	}
	return fmt.Errorf("hooks: %s: unexpected answer %q", verb, line)
}

// hook runs verb and maps "unsupported" to a skip.
func (x *target) hook(ctx context.Context, verb string) error {
	err := x.hooks.call(ctx, verb)
	if errors.Is(err, errHookUnsupported) {
		return skipf("needs the %q hook (--hooks)", verb)
	}
	return err
}
