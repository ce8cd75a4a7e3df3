package coordserver_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/workload"
)

// The client lanes of TestCrashSIGKILL. A lane owns its objectives and runs
// one operation at a time: it issues a command, and when the reply is lost
// (dropped on purpose or cut by a kill) it resolves the operation before
// the next one — it looks the OperationId up (GET_OPERATION_RESULT) and, only
// when the answer is UNKNOWN, resends the same command under the same id.
// So every objective's revision counts its commands exactly.

// crashSharedClient is one coordclient.Client per principal, shared by that
// principal's client lanes (commands multiplex on one connection) and
// kept across restarts: it redials by itself, and its AuthorityMemory must
// accept every new activation.
type crashSharedClient struct {
	mu sync.Mutex
	c  *coordclient.Client
}

type crashLane struct {
	h      *crashHarness
	idx    int
	key    int
	raw    bool
	shared *crashSharedClient
	rng    *mrand.Rand
	objs   []*crashObj

	rc    *rawframe.Conn
	rcGen int
}

// Lane drop modes.
const (
	crashSendNormal     = iota // send and read the reply
	crashSendIgnore            // send, never look at the reply (lookup instead)
	crashSendCloseAfter        // raw: write the command, close at once
	crashSendTorn              // raw: write part of the frame, close
	crashResend                // the resend after UNKNOWN: read the reply
)

func (h *crashHarness) startLanes() {
	shared := []*crashSharedClient{{}, {}}
	add := func(key int, raw bool, sh *crashSharedClient) {
		l := &crashLane{h: h, idx: len(h.lanes), key: key, raw: raw, shared: sh,
			rng: mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))}
		h.lanes = append(h.lanes, l)
	}
	for _, k := range []int{0, 0, 1, 1} {
		add(k, false, shared[k])
	}
	for _, k := range []int{2, 2, 2, 0} {
		add(k, true, nil)
	}
	for _, l := range h.lanes {
		h.lanesWG.Add(1)
		go l.loop()
	}
}

func (l *crashLane) close() {
	if l.rc != nil {
		l.rc.Close()
	}
	if l.shared != nil {
		l.shared.mu.Lock()
		if l.shared.c != nil {
			l.shared.c.Close()
			l.shared.c = nil
		}
		l.shared.mu.Unlock()
	}
}

func (l *crashLane) loop() {
	defer l.h.lanesWG.Done()
	var pending *crashOp
	failedGen := 0
	for {
		s, ok := l.h.waitServer(failedGen)
		if !ok {
			return
		}
		var interrupted bool
		pending, interrupted = l.work(s, pending)
		if !interrupted {
			return
		}
		failedGen = s.gen
	}
}

// work runs operations against server s until a call is interrupted (true)
// or the run ends (false). It returns the operation still in doubt.
func (l *crashLane) work(s crashServer, pending *crashOp) (*crashOp, bool) {
	h := l.h
	for {
		if pending != nil {
			if l.resolve(s, pending) {
				return pending, true
			}
			pending = nil
			h.inflight.Add(-1)
		}
		if h.final.Load() || h.stop.Load() {
			return nil, false
		}
		// A short pause keeps the store (checked in full after every
		// kill) to a few hundred commands per activation.
		time.Sleep(time.Duration(5+l.rng.IntN(20)) * time.Millisecond)
		op := l.nextOp()
		h.inflight.Add(1)
		pending = op
		mode := crashSendNormal
		if l.raw {
			switch n := l.rng.IntN(20); {
			case n < 3:
				mode = crashSendCloseAfter
			case n < 5:
				mode = crashSendTorn
			case n < 9:
				mode = crashSendIgnore
			}
		} else if l.rng.IntN(7) == 0 {
			mode = crashSendIgnore
		}
		res, st := l.send(s, op, mode)
		switch st {
		case crashGot:
			h.observe(op, res, "reply", true)
			if res.Tag == coordwire.OperationSucceeded {
				pending = nil
				h.inflight.Add(-1)
			}
		case crashDropped:
			h.mu.Lock()
			h.tal.dropped++
			if mode == crashSendTorn {
				h.tal.torn++
			}
			h.mu.Unlock()
		case crashLost:
			l.lost(op)
			return pending, true
		}
	}
}

func (l *crashLane) lost(op *crashOp) {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if !op.lostToKill {
		op.lostToKill = true
		h.tal.lostToKill++
	}
}

// resolve learns op's outcome: lookup, and only after UNKNOWN a resend of
// the same command. It reports whether it was interrupted.
func (l *crashLane) resolve(s crashServer, op *crashOp) bool {
	h := l.h
	for {
		res, ok := l.lookup(s, op)
		if !ok {
			return true
		}
		h.observe(op, res, "lookup", false)
		if res.Tag != coordwire.OperationUnknown {
			return false
		}
		h.mu.Lock()
		op.resends++
		op.torn = false
		h.tal.resent++
		h.mu.Unlock()
		res, st := l.send(s, op, crashResend)
		switch st {
		case crashGot:
			h.observe(op, res, "resend", true)
			if res.Tag == coordwire.OperationSucceeded {
				return false
			}
		case crashLost:
			l.lost(op)
			return true
		}
	}
}

func (l *crashLane) nextOp() *crashOp {
	h := l.h
	var obj *crashObj
	if len(l.objs) == 0 || len(l.objs) < 8 && l.rng.IntN(5) == 0 {
		obj = &crashObj{id: coordwire.NewObjectiveID()}
		l.objs = append(l.objs, obj)
	} else {
		obj = l.objs[l.rng.IntN(len(l.objs))]
	}
	rev := uint64(len(obj.ops)) + 1
	doc := []byte(fmt.Sprintf("lane %d objective %v revision %d %s", l.idx, obj.id, rev, strings.Repeat("x", l.rng.IntN(200))))
	var cmd *coordclient.Cmd
	if rev == 1 {
		cmd = coordclient.CreateObjective(obj.id, 1, doc)
	} else {
		cmd = coordclient.UpdateObjective(obj.id, 1, doc, coordclient.ObjectiveAt(obj.id, rev-1))
	}
	dg, err := cmd.Digest()
	if err != nil {
		h.failf("digest: %v", err)
	}
	op := &crashOp{id: cmd.OperationID(), lane: l, obj: obj, rev: rev, doc: doc, cmd: cmd, digest: dg}
	h.mu.Lock()
	h.ops[op.id] = op
	if rev == 1 {
		h.objs[obj.id] = obj
	}
	obj.ops = append(obj.ops, op)
	h.tal.issued++
	h.mu.Unlock()
	return op
}

// Send outcomes.
const (
	crashGot     = iota // a result (SUCCEEDED or UNKNOWN from the client's own lookup)
	crashDropped        // the reply was dropped on purpose
	crashLost           // the call was cut short (the kill)
)

func (l *crashLane) send(s crashServer, op *crashOp, mode int) (coordwire.OperationResult, int) {
	if l.raw {
		return l.rawSend(s, op, mode)
	}
	c, ok := l.client(s)
	if !ok {
		return coordwire.OperationResult{}, crashLost
	}
	timeout := 10 * time.Second
	if mode == crashSendIgnore {
		timeout = time.Duration(l.rng.IntN(3000)) * time.Microsecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := c.Command(ctx, op.cmd)
	switch {
	case mode == crashSendIgnore:
		return coordwire.OperationResult{}, crashDropped
	case err == nil:
		return r.Operation, crashGot
	case errors.Is(err, coordclient.ErrUnknownOperation) && r != nil:
		// The client lost the reply, looked the id up and got UNKNOWN; it
		// does not resend on its own (§8).
		l.lost(op)
		return r.Operation, crashGot
	case errors.Is(err, coordclient.ErrUnknownOperation):
		l.lost(op)
		return coordwire.OperationResult{Tag: coordwire.OperationUnknown}, crashGot
	case crashInterrupted(err):
		return coordwire.OperationResult{}, crashLost
	}
	l.h.failf("lane %d: command %v (objective %v rev %d): %v", l.idx, op.id, op.obj.id, op.rev, err)
	return coordwire.OperationResult{}, crashLost
}

func (l *crashLane) lookup(s crashServer, op *crashOp) (coordwire.OperationResult, bool) {
	if l.raw {
		return l.rawLookup(s, op)
	}
	c, ok := l.client(s)
	if !ok {
		return coordwire.OperationResult{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.OperationResult(ctx, op.id)
	switch {
	case err == nil:
		return r.Operation, true
	case errors.Is(err, coordclient.ErrUnknownOperation) && r != nil:
		return r.Operation, true
	case crashInterrupted(err):
		return coordwire.OperationResult{}, false
	}
	l.h.failf("lane %d: lookup %v: %v", l.idx, op.id, err)
	return coordwire.OperationResult{}, false
}

func (l *crashLane) client(s crashServer) (*coordclient.Client, bool) {
	sh := l.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.c != nil {
		return sh.c, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := coordclient.Dial(ctx, "unix:"+l.h.sock, l.h.clientConfig(l.key, nil))
	if err != nil {
		if !crashInterrupted(err) {
			l.h.failf("lane %d: dial: %v", l.idx, err)
		}
		return nil, false
	}
	sh.c = c
	return c, true
}

// rawConn returns the lane's raw connection to server s, dialing and
// handshaking (and checking HELLO_OK's certificate) when needed.
func (l *crashLane) rawConn(s crashServer) (*rawframe.Conn, bool) {
	if l.rc != nil && l.rcGen == s.gen {
		return l.rc, true
	}
	if l.rc != nil {
		l.rc.Close()
		l.rc = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := rawframe.Dial(ctx, "unix:"+l.h.sock, rawframe.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, false
	}
	k := l.h.keys[l.key]
	if _, err := rc.Handshake(workload.ClientConfig{WorkloadKey: k, PinnedAuthorityFingerprint: l.h.authFP,
		RequestedScope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, RequestedExpiry: time.Now().Add(time.Hour)}, 5*time.Second); err != nil {
		rc.Close()
		return nil, false
	}
	ok := rc.HelloOK()
	if err := cert.VerifyHelloOK(ok, l.h.wpub, time.Now()); err != nil {
		l.h.failf("lane %d: HELLO_OK certificate: %v", l.idx, err)
		rc.Close()
		return nil, false
	}
	if uint64(ok.AuthorityEpoch) < s.ready.Epoch {
		l.h.failf("lane %d: HELLO_OK epoch %d below the activation's %d", l.idx, ok.AuthorityEpoch, s.ready.Epoch)
	}
	l.rc, l.rcGen = rc, s.gen
	return rc, true
}

func (l *crashLane) dropRaw() {
	if l.rc != nil {
		l.rc.Close()
		l.rc = nil
	}
}

func (l *crashLane) rawSend(s crashServer, op *crashOp, mode int) (coordwire.OperationResult, int) {
	rc, ok := l.rawConn(s)
	if !ok {
		return coordwire.OperationResult{}, crashLost
	}
	id := rc.NextRequestID()
	f := &coordwire.CoordCommand{RequestID: id, Guard: rc.Guard(), OperationID: op.cmd.OperationID(), Kind: op.cmd.Kind(),
		Payload: op.cmd.Payload(), Preconditions: op.cmd.Preconditions()}
	switch mode {
	case crashSendTorn:
		b := rawframe.Frame(f)
		l.h.mu.Lock()
		op.torn = true
		l.h.mu.Unlock()
		rc.SendRaw(b[:1+l.rng.IntN(len(b)-1)])
		l.dropRaw()
		return coordwire.OperationResult{}, crashDropped
	case crashSendCloseAfter:
		rc.Send(f)
		l.dropRaw()
		return coordwire.OperationResult{}, crashDropped
	case crashSendIgnore:
		if err := rc.Send(f); err != nil {
			l.dropRaw()
		}
		return coordwire.OperationResult{}, crashDropped
	}
	if err := rc.Send(f); err != nil {
		l.dropRaw()
		return coordwire.OperationResult{}, crashLost
	}
	r, err := rc.ReadReply(id, 10*time.Second)
	if err != nil {
		l.dropRaw()
		return coordwire.OperationResult{}, crashLost
	}
	switch r := r.(type) {
	case *coordwire.CoordCommandResult:
		return r.Operation, crashGot
	case *coordwire.CoordError:
		if r.Code == coordwire.StaleAuthority || r.Code == coordwire.AuthorityFenced {
			l.dropRaw()
			return coordwire.OperationResult{}, crashLost
		}
		l.h.failf("lane %d: command %v (objective %v rev %d): COORD_ERROR %v %q", l.idx, op.id, op.obj.id, op.rev, r.Code, r.Message)
	default:
		l.h.failf("lane %d: command %v: unexpected reply %T", l.idx, op.id, r)
	}
	l.dropRaw()
	return coordwire.OperationResult{}, crashLost
}

func (l *crashLane) rawLookup(s crashServer, op *crashOp) (coordwire.OperationResult, bool) {
	rc, ok := l.rawConn(s)
	if !ok {
		return coordwire.OperationResult{}, false
	}
	id := rc.NextRequestID()
	if err := rc.Send(&coordwire.GetOperationResult{RequestID: id, Guard: rc.Guard(), OperationID: op.id}); err != nil {
		l.dropRaw()
		return coordwire.OperationResult{}, false
	}
	r, err := rc.ReadReply(id, 10*time.Second)
	if err != nil {
		l.dropRaw()
		return coordwire.OperationResult{}, false
	}
	switch r := r.(type) {
	case *coordwire.OperationResultFrame:
		return r.Operation, true
	case *coordwire.CoordError:
		if r.Code == coordwire.StaleAuthority || r.Code == coordwire.AuthorityFenced {
			l.dropRaw()
			return coordwire.OperationResult{}, false
		}
		l.h.failf("lane %d: lookup %v: COORD_ERROR %v %q", l.idx, op.id, r.Code, r.Message)
	default:
		l.h.failf("lane %d: lookup %v: unexpected reply %T", l.idx, op.id, r)
	}
	l.dropRaw()
	return coordwire.OperationResult{}, false
}
