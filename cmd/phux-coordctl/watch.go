package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// statsPoll is how often watch compares the Mirror's counters to report
// GAPs, replays and reconnects (the Mirror has no callback for them).
const statsPoll = 50 * time.Millisecond

func setupWatch(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	count := fs.Int("count", 0, "exit 0 after this many object changes (initial adds included); 0: no limit")
	dur := fs.Duration("for", 0, "exit 0 after this long; 0: until interrupted")
	noInitial := fs.Bool("no-initial", false, "do not print the initial state, only the changes after it")
	kindName := fs.String("kind", "", "only changes of objects of this kind (OBJECTIVE, RUN, OPERATION, ...); default: every kind")
	return func(ctx context.Context, _ []string) error {
		if *count < 0 || *dur < 0 {
			return usagef("--count and --for must not be negative")
		}
		var kind coordwire.ObjectKind
		if *kindName != "" {
			k, ok := parseKind(*kindName)
			if !ok {
				return usagef("--kind: unknown object kind")
			}
			kind = k
		}
		skip := func(o coordclient.Object) bool { return kind != 0 && o.Ref().Kind != kind }
		dctx, cancel := context.WithTimeout(ctx, e.conn.timeout)
		cl, _, err := e.conn.dial(dctx, 0)
		cancel()
		if err != nil {
			return err
		}
		defer cl.Close()
		if *dur > 0 {
			var c context.CancelFunc
			ctx, c = context.WithTimeout(ctx, *dur)
			defer c()
		}
		w := &watcher{e: e, limit: *count, done: make(chan struct{}), noInitial: *noInitial}
		m := coordclient.NewMirror(cl, coordclient.MirrorConfig{})
		defer m.Close()
		reg := m.AddHandler(coordclient.Handler{
			OnAdd: func(o coordclient.Object, initial bool) {
				if initial && w.noInitial || skip(o) {
					return
				}
				w.change(map[string]any{"event": "add", "initial": initial, "object": recordJSON(o.Record())},
					fmt.Sprintf("add %s rev=%d state=%s%s", refString(o.Ref()), o.Revision(), recordState(o.Record()), initialTag(initial)))
			},
			OnUpdate: func(old, new coordclient.Object) {
				if skip(new) {
					return
				}
				w.change(map[string]any{"event": "update", "old_revision": uint64(old.Revision()), "object": recordJSON(new.Record())},
					fmt.Sprintf("update %s rev=%d->%d state=%s", refString(new.Ref()), old.Revision(), new.Revision(), recordState(new.Record())))
			},
			OnDelete: func(last coordclient.Object) {
				if skip(last) {
					return
				}
				w.change(map[string]any{"event": "delete", "object": recordJSON(last.Record())},
					fmt.Sprintf("delete %s rev=%d", refString(last.Ref()), last.Revision()))
			},
			OnReplaced: func(cut coordwire.EventCut, reason coordclient.ReplaceReason) {
				w.note(map[string]any{"event": "resynced", "cut": uint64(cut), "reason": reason.String()},
					fmt.Sprintf("resynced: replacement snapshot at cut %d (%s)", cut, reason))
			},
		})
		defer reg.Remove()
		sctx, scancel := context.WithTimeout(ctx, e.conn.timeout)
		err = m.WaitSynced(sctx)
		scancel()
		if err != nil {
			if ctx.Err() != nil && *dur > 0 {
				return nil
			}
			return err
		}
		// The initial adds are printed before "synced".
		for !reg.HasSynced() {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Millisecond):
			}
		}
		st := m.Status()
		w.note(map[string]any{"event": "synced", "cut": uint64(st.Cut), "authority_epoch": uint64(st.Authority.AuthorityEpoch)},
			fmt.Sprintf("synced at cut %d (epoch %d)", st.Cut, st.Authority.AuthorityEpoch))
		last := m.Stats()
		tick := time.NewTicker(statsPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				if *dur > 0 && ctx.Err() == context.DeadlineExceeded {
					return nil
				}
				return nil // interrupted: a normal end
			case <-w.done:
				return nil
			case <-tick.C:
			}
			now := m.Stats()
			for r := range now.Gaps {
				if d := now.Gaps[r] - last.Gaps[r]; d > 0 {
					w.note(map[string]any{"event": "gap", "reason": coordwire.GapReason(r).String(), "count": d},
						fmt.Sprintf("gap: %s (x%d)", coordwire.GapReason(r), d))
				}
			}
			if d := now.Replays - last.Replays; d > 0 {
				w.note(map[string]any{"event": "replayed", "count": d},
					fmt.Sprintf("replayed: gap healed by replay at the exact cut (x%d)", d))
			}
			if d := now.Reconnects - last.Reconnects; d > 0 {
				w.note(map[string]any{"event": "reconnected", "count": d}, fmt.Sprintf("reconnected (x%d)", d))
			}
			last = now
			if s := m.Status(); s.State == coordclient.Failed || s.State == coordclient.Quarantined {
				return s.Err
			}
		}
	}
}

// parseKind parses an ObjectKind by its spec name.
func parseKind(name string) (coordwire.ObjectKind, bool) {
	for k := coordwire.ObjectKind(1); k < 64; k++ {
		if k.Valid() && k.String() == name {
			return k, true
		}
	}
	return 0, false
}

func initialTag(initial bool) string {
	if initial {
		return " (initial)"
	}
	return ""
}

// watcher prints the Mirror's changes one line at a time.
type watcher struct {
	e         *env
	limit     int
	noInitial bool
	mu        sync.Mutex
	n         int
	done      chan struct{}
	closed    bool
}

// change prints an object change and counts it against --count.
func (w *watcher) change(j map[string]any, human string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.printLocked(j, human)
	w.n++
	if w.limit > 0 && w.n >= w.limit {
		w.closed = true
		close(w.done)
	}
}

// note prints a line that is not an object change.
func (w *watcher) note(j map[string]any, human string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.printLocked(j, human)
	}
}

func (w *watcher) printLocked(j map[string]any, human string) {
	_ = w.e.emitEvent(j, human)
}
