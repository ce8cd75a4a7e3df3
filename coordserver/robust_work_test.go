package coordserver_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/internal/testkit/history"
)

// rbCmd is a command a worker sent, kept for resends and lookups.
type rbCmd struct {
	cmd *coordclient.Cmd
	in  history.Input
}

// rbWorkers is the number of client goroutines of a lineage.
const rbWorkers = 4

// startWork starts the workers, the Mirror and the raw subscriber.
func (l *rbLineage) startWork() {
	l.started = true
	l.mirrorC = l.dial(0)
	l.mirror = coordclient.NewMirror(l.mirrorC, coordclient.MirrorConfig{PingInterval: 300 * time.Millisecond, PingTimeout: 600 * time.Millisecond,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Trace: l.mstream.MirrorTrace()})
	l.readers.Add(1)
	l.rawC = l.dial(1)
	go l.subscriber(l.rawC)
	if l.ownerSock != "" {
		c := l.dial(0)
		in, cmd := l.createIn(0, l.runObj)
		if out := l.call(99, c, in, func(ctx context.Context) (*coordclient.Result, error) { return c.Command(ctx, cmd) }, false); out.Tag != coordwire.OperationSucceeded {
			l.fatalf("create the Runs' objective: %v", out)
		}
	}
	for i := range rbWorkers {
		l.mu.Lock()
		seed := l.rng.Uint64()
		l.mu.Unlock()
		l.workers.Add(1)
		go l.worker(i, i%2, mrand.New(mrand.NewPCG(seed, uint64(i))))
	}
}

func (l *rbLineage) principal(key int) string { return fmt.Sprintf("p%d", key) }

func (l *rbLineage) createIn(key int, obj coordwire.ObjectiveID, pre ...coordwire.Precondition) (history.Input, *coordclient.Cmd) {
	cmd := coordclient.CreateObjective(obj, 1, []byte("robust create"), pre...)
	return l.inputOf(history.Create, key, cmd, coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj}), cmd
}

func (l *rbLineage) inputOf(k history.Kind, key int, cmd *coordclient.Cmd, obj coordwire.ObjectRef) history.Input {
	d, err := cmd.Digest()
	if err != nil {
		l.t.Errorf("digest: %v", err)
	}
	in := history.Input{Kind: k, Op: cmd.OperationID(), Principal: l.principal(key), Digest: d, Object: obj}
	for _, p := range cmd.Preconditions() {
		if p.Object == obj {
			in.Pre, in.PreRev = true, uint64(p.ExpectedRevision)
		}
	}
	return in
}

// call records one call: do runs under a 3 s deadline.
func (l *rbLineage) call(client int, c *coordclient.Client, in history.Input, do func(context.Context) (*coordclient.Result, error), lookup bool) history.Output {
	rc := l.rec.Begin(client, in)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	res, err := do(ctx)
	cancel()
	out := history.Classify(res, err, lookup)
	rc.End(out)
	if out.Outcome == history.Lost || out.Outcome == history.Unavailable {
		time.Sleep(30 * time.Millisecond) // no busy loop while no coordinator serves
	}
	return out
}

// pickObjective returns an objective of the window; the window moves on
// every 25 calls of the lineage, so that each objective's partition of
// the history stays small.
func (l *rbLineage) pickObjective(rng *mrand.Rand) coordwire.ObjectiveID {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.made++
	if len(l.objs) == 0 || l.made >= 25 {
		l.objs = append(l.objs, coordwire.NewObjectiveID())
		if len(l.objs) > 3 {
			l.objs = l.objs[1:]
		}
		l.made = 0
	}
	return l.objs[rng.IntN(len(l.objs))]
}

// worker issues one call at a time until stop: creates, compare-and-set
// updates (the expected revision read from the Mirror), blind updates,
// exact resends, resends under another digest (conflicts), lookups (its
// own and the other principal's), and with an owner START_RUN and
// CANCEL_RUN.
func (l *rbLineage) worker(idx, key int, rng *mrand.Rand) {
	defer l.workers.Done()
	c := l.dial(key)
	var mine []rbCmd
	remember := func(rc rbCmd) {
		mine = append(mine, rc)
		if len(mine) > 24 {
			mine = mine[1:]
		}
	}
	send := func(rc rbCmd) history.Output {
		return l.call(idx, c, rc.in, func(ctx context.Context) (*coordclient.Result, error) { return c.Command(ctx, rc.cmd) }, false)
	}
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		p := rng.IntN(100)
		switch {
		case l.ownerSock != "" && p < 12:
			l.mu.Lock()
			inc := l.ownerInc
			l.mu.Unlock()
			run := coordwire.NewRunID()
			doc, err := (&execowner.Executor{Argv: []string{"/bin/sh", "-c", "printf '%s\\n' " + hex.EncodeToString(run[:]) + " >> " + l.spawnLog}}).Marshal()
			if err != nil {
				l.t.Error(err)
				return
			}
			cmd := coordclient.StartRun(coordwire.StartRun{ObjectiveID: l.runObj, RunID: run, WorkSessionID: coordwire.NewWorkSessionID(),
				ExecutorSchema: 1, ExecutorDocument: doc, PendingBindingID: coordwire.NewPendingBindingID(),
				OwnerAuthorityFingerprint: l.ownerFP, OwnerIncarnation: inc, TerminalGroup: execowner.DefaultGroup})
			rc := rbCmd{cmd, l.inputOf(history.StartRun, key, cmd, coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: run})}
			remember(rc)
			l.mu.Lock()
			l.runs = append(l.runs, run)
			l.mu.Unlock()
			send(rc)
		case l.ownerSock != "" && p < 18:
			l.mu.Lock()
			if len(l.runs) == 0 {
				l.mu.Unlock()
				continue
			}
			run := l.runs[max(0, len(l.runs)-1-rng.IntN(4))]
			l.mu.Unlock()
			cmd := coordclient.CancelRun(run)
			rc := rbCmd{cmd, l.inputOf(history.Cancel, key, cmd, coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: run})}
			remember(rc)
			send(rc)
		case p < 30:
			in, cmd := l.createIn(key, l.pickObjective(rng))
			rc := rbCmd{cmd, in}
			remember(rc)
			send(rc)
		case p < 60:
			obj := l.pickObjective(rng)
			ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj}
			var rev coordwire.ObjectRevision
			if o, ok := l.mirror.Get(ref); ok {
				rev = o.Revision()
			}
			cmd := coordclient.UpdateObjective(obj, 1, []byte(fmt.Sprintf("cas %d", rng.Uint32())), coordclient.ObjectiveAt(obj, uint64(rev)))
			rc := rbCmd{cmd, l.inputOf(history.Update, key, cmd, ref)}
			remember(rc)
			send(rc)
		case p < 72:
			obj := l.pickObjective(rng)
			cmd := coordclient.UpdateObjective(obj, 1, []byte(fmt.Sprintf("blind %d", rng.Uint32())))
			rc := rbCmd{cmd, l.inputOf(history.Update, key, cmd, coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj})}
			remember(rc)
			send(rc)
		case p < 82 && len(mine) > 0:
			send(mine[rng.IntN(len(mine))]) // the same command again
		case p < 86 && len(mine) > 0:
			// The same OperationId with another payload: a conflict
			// (or an admission, if the first was never admitted).
			old := mine[rng.IntN(len(mine))]
			if old.in.Kind != history.Create && old.in.Kind != history.Update {
				continue
			}
			obj := coordwire.ObjectiveID(old.in.Object.ID)
			cmd := coordclient.UpdateObjective(obj, 1, []byte("conflicting")).WithOperationID(old.cmd.OperationID())
			in := l.inputOf(history.Update, key, cmd, old.in.Object)
			send(rbCmd{cmd, in})
		case len(mine) > 0:
			old := mine[rng.IntN(len(mine))]
			in := history.Input{Kind: history.Lookup, Op: old.in.Op, Principal: l.principal(key), Object: old.in.Object}
			l.call(idx, c, in, func(ctx context.Context) (*coordclient.Result, error) { return c.OperationResult(ctx, old.in.Op) }, true)
		}
		time.Sleep(time.Duration(rng.IntN(8)) * time.Millisecond)
	}
}

// subscriber is the raw subscriber (principal 1): SUBSCRIBE after the
// last event it received, again after every GAP or lost connection.
func (l *rbLineage) subscriber(c *coordclient.Client) {
	defer l.readers.Done()
	for {
		select {
		case <-l.readStop:
			return
		default:
		}
		last := coordwire.EventCut(l.rawLast.Load())
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		sub, err := c.Subscribe(ctx, last, coordclient.SubscribeOptions{})
		cancel()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		l.rstream.Add(history.Step{Kind: history.Subscribed, Sub: sub.ID(), After: last, Next: 1})
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			ev, err := sub.Next(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				select {
				case <-l.readStop:
					sub.Close()
					return
				default:
					continue
				}
			}
			var ge *coordclient.GapError
			if errors.As(err, &ge) {
				l.rstream.Add(history.Step{Kind: history.Gap, Sub: sub.ID(), Gap: ge.Gap})
				sub.Close()
				break
			}
			if err != nil {
				l.rstream.Add(history.Step{Kind: history.Closed, Sub: sub.ID()})
				sub.Close()
				break
			}
			l.rstream.Add(history.Step{Kind: history.Event, Sub: sub.ID(), Event: *ev})
			l.rawLast.Store(uint64(ev.EventSequence))
		}
	}
}

// finish stops the workload and checks everything the scenario recorded.
func (l *rbLineage) finish() {
	if !l.started {
		return
	}
	t := l.t
	close(l.stop)
	l.workers.Wait()
	if l.proxy != nil {
		l.proxy.Pause(false)
	}
	// A serving coordinator for the final checks.
	l.mu.Lock()
	cur := l.cur
	l.mu.Unlock()
	alive := cur != nil
	if alive {
		select {
		case <-cur.exited:
			alive = false
		default:
		}
	}
	if !alive {
		l.up(nil)
	}
	// Every command's id looked up by its principal: an acknowledged
	// operation that was lost shows as UNKNOWN here.
	lookers := [2]*coordclient.Client{l.dial(0), l.dial(1)}
	seen := map[coordwire.OperationID]bool{}
	var todo [2][]history.Input
	for _, op := range l.rec.Operations() {
		in := op.Input.(history.Input)
		if in.Kind == history.Lookup || seen[in.Op] {
			continue
		}
		seen[in.Op] = true
		key := 0
		if in.Principal == l.principal(1) {
			key = 1
		}
		todo[key] = append(todo[key], history.Input{Kind: history.Lookup, Op: in.Op, Principal: in.Principal, Object: in.Object})
	}
	var lwg sync.WaitGroup
	for key := range todo {
		for part := range 4 {
			lwg.Add(1)
			go func() {
				defer lwg.Done()
				c := lookers[key]
				if part > 0 {
					c = l.dial(key)
				}
				for i := part; i < len(todo[key]); i += 4 {
					lin := todo[key][i]
					for range 5 {
						if out := l.call(100+8*key+part, c, lin, func(ctx context.Context) (*coordclient.Result, error) {
							return c.OperationResult(ctx, lin.Op)
						}, true); out.Outcome != history.Lost {
							break
						}
					}
				}
			}()
		}
	}
	lwg.Wait()
	// One last command of the Mirror's principal, so that the log ends
	// with events the Mirror sees (an activation's ADMIN events, which it
	// does not, may end it otherwise, and its cut would stay behind).
	fin, fcmd := l.createIn(0, coordwire.NewObjectiveID())
	for range 5 {
		if out := l.call(100, lookers[0], fin, func(ctx context.Context) (*coordclient.Result, error) { return lookers[0].Command(ctx, fcmd) }, false); out.Outcome != history.Lost {
			break
		}
	}
	// The Mirror equals a fresh snapshot (retried while Runs still
	// commit facts), and the subscriber catches up.
	var merr error
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		merr = history.MirrorMatches(ctx, lookers[0], l.mirror)
		cancel()
		if merr == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if merr != nil {
		l.fatalf("mirror: %v", merr)
	}
	// The subscriber has caught up when it received everything up to the
	// Mirror's cut it may see: it stops once nothing arrived for a while
	// (the log's check says whether it had all).
	for quiet, prev := 0, l.rawLast.Load(); quiet < 20; {
		time.Sleep(25 * time.Millisecond)
		if cur := l.rawLast.Load(); cur != prev {
			prev, quiet = cur, 0
		} else {
			quiet++
		}
	}
	close(l.readStop)
	caps := lookers[0].Session().HelloOK.NegotiatedCapabilities
	l.mirror.Close()
	for _, c := range l.clients {
		c.Close()
	}
	l.readers.Wait()
	l.mu.Lock()
	for _, c := range l.children {
		c.cmd.Process.Signal(syscall.SIGKILL)
	}
	l.mu.Unlock()
	for _, c := range l.children {
		<-c.exited
	}
	if l.proxy != nil {
		l.proxy.Close()
	}

	// The store's log, as each stream's principal may see it.
	ctx := context.Background()
	var st coordstore.Store
	var err error
	switch l.engine {
	case "pg":
		st, err = pgstore.Open(ctx, pgstore.Config{DSN: l.pgDSN, Schema: l.pgSchema})
	case "pebble":
		st, err = pebblestore.OpenContext(ctx, l.store, pebblestore.Config{})
	default:
		st, err = boltstore.Open(l.store, boltstore.Config{})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var all []history.RefEvent
	vis := [2][]history.RefEvent{}
	if err := st.View(ctx, func(tx coordstore.ReadTx) error {
		all, vis[0], vis[1] = nil, nil, nil
		for e, err := range tx.Events(0) {
			if err != nil {
				return err
			}
			re := history.RefEvent{Seq: coordwire.EventSequence(e.Sequence), ID: e.ID, Kind: e.Kind, Object: e.Object.Ref(), Rev: coordwire.ObjectRevision(e.ObjectRevision)}
			all = append(all, re)
			for k := range vis {
				ok, err := core.VisibleEvent(core.Principal{KeyID: l.keys[k].KeyID(), Scope: runsScope, Caps: caps}, e)
				if err != nil {
					return err
				}
				if ok {
					vis[k] = append(vis[k], re)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ops := l.rec.Operations()
	groups := l.groups(ops)
	if err := history.CheckGroups(all, groups); err != nil {
		l.fatalf("%v", err)
	}
	for k, s := range []*history.Stream{l.mstream, l.rstream} {
		if err := s.Validate(history.Reference{Events: vis[k], Groups: groups, CaughtUp: true}); err != nil {
			steps := s.Steps()
			var b strings.Builder
			for _, st := range steps[max(0, len(steps)-8):] {
				fmt.Fprintf(&b, "\n  %+v", st)
			}
			for _, e := range vis[k][max(0, len(vis[k])-6):] {
				fmt.Fprintf(&b, "\n  log %d %v %v", e.Seq, e.Kind, e.Object.Kind)
			}
			l.fatalf("%v; last steps:%s", err, b.String())
		}
	}
	// The ids any command of which was admitted: the log is read after
	// every coordinator stopped, and is whole (no event pruned), so an id
	// it does not hold was never admitted and never will be.
	admitted := map[coordwire.OperationID]bool{}
	whole := len(all) == 0 || all[0].Seq == 1
	for _, e := range all {
		if e.Kind == coordwire.EventOperationChanged && e.Object.Kind == coordwire.ObjectKindOperation {
			admitted[coordwire.OperationID(e.Object.ID)] = true
		}
	}
	resolved := history.Resolve(ops, func(id coordwire.OperationID) bool { return !whole || admitted[id] })
	if err := history.Check(resolved, 2*time.Minute); err != nil {
		if errors.Is(err, history.ErrNotLinearizable) {
			for _, e := range all {
				if e.Object.Kind == coordwire.ObjectKindObjective && strings.Contains(err.Error(), fmt.Sprint(e.Object)) {
					l.t.Logf("log %d %v %v rev %d", e.Seq, e.Kind, e.Object, e.Rev)
				}
			}
		}
		l.fatalf("%v", err)
	}
	if err := history.Increasing("activation epoch", l.epochs); err != nil {
		l.fatalf("%v", err)
	}
	spawned := 0
	if l.spawnLog != "" {
		b, _ := os.ReadFile(l.spawnLog)
		count := map[string]int{}
		for _, line := range strings.Fields(string(b)) {
			count[line]++
			spawned++
			if count[line] > 1 {
				l.fatalf("Run %s spawned %d times", line, count[line])
			}
		}
	}
	acked, lost := 0, 0
	for _, op := range ops {
		out := op.Output.(history.Output)
		switch {
		case out.Outcome == history.Lost:
			lost++
		case out.Outcome == history.Result && out.Tag != coordwire.OperationUnknown && op.Input.(history.Input).Kind != history.Lookup:
			acked++
		}
	}
	me, _ := l.mstream.Counts()
	re, _ := l.rstream.Counts()
	l.tally.add(func(tt *rbTally) {
		tt.histories++
		tt.ops += len(ops)
		tt.acked += acked
		tt.lost += lost
		tt.streams += 2
		tt.events += me + re
		tt.matches++
		tt.spawned += spawned
		tt.epochs += len(l.epochs)
	})
	t.Logf("%s: %d calls (%d acknowledged commands, %d lost), %d commits known, streams %d + %d events, %d activations (epochs %v), %d runs spawned",
		l.name, len(ops), acked, lost, len(groups), me, re, len(l.epochs), l.epochs, spawned)
}

// groups are the commits the history knows: an objective command's two
// events (OBJECTIVE_CHANGED, OPERATION_CHANGED) ending at its completion
// sequence, a START_RUN admission's three (RUN_CHANGED,
// WORK_SESSION_CHANGED, OPERATION_CHANGED) ending at its admission
// sequence.
func (l *rbLineage) groups(ops []porcupineOp) []history.Group {
	seen := map[coordwire.EventSequence]bool{}
	var out []history.Group
	for _, op := range ops {
		in, o := op.Input.(history.Input), op.Output.(history.Output)
		if o.Outcome != history.Result {
			continue
		}
		var r coordwire.OperationResult
		if r.Decode([]byte(o.Result)) != nil {
			continue
		}
		var g history.Group
		switch {
		case r.Tag == coordwire.OperationSucceeded && (in.Kind == history.Create || in.Kind == history.Update ||
			in.Kind == history.Lookup && in.Object.Kind == coordwire.ObjectKindObjective):
			g = history.Group{First: r.CompletedEventSequence - 1, Last: r.CompletedEventSequence, Op: in.Op}
		case r.Tag == coordwire.OperationPending && in.Object.Kind == coordwire.ObjectKindRun:
			if in.Kind != history.StartRun && !(in.Kind == history.Lookup && l.isStart(ops, in.Op)) {
				continue
			}
			g = history.Group{First: r.AdmittedEventSequence - 2, Last: r.AdmittedEventSequence, Op: in.Op}
		default:
			continue
		}
		if !seen[g.Last] {
			seen[g.Last] = true
			out = append(out, g)
		}
	}
	return out
}

func (l *rbLineage) isStart(ops []porcupineOp, id coordwire.OperationID) bool {
	for _, op := range ops {
		if in := op.Input.(history.Input); in.Op == id && in.Kind == history.StartRun {
			return true
		}
	}
	return false
}
