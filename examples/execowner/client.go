package execowner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// maxFactsInFlight bounds the facts a client delivers at once (one per
// live binding of the owner); more is a protocol violation.
const maxFactsInFlight = 4096

// ErrConnLost is returned by a Client's calls once its connection is gone.
// For an effect call in flight it means "not answered": the effect may or
// may not have happened at the owner, whose journal knows (ask Outcome on
// a new connection).
var ErrConnLost = errors.New("execowner: connection to the owner lost")

// Client is a connection to an execowner process (cmd/execowner, or any
// Server). It implements coordserver.OwnerAdapter and delivers the
// owner's source facts to its FactSink. It does not reconnect: when Done
// is closed, Dial again — the same Incarnation means the same owner
// process (a coordinator restart), another one means the owner restarted
// and must be registered as a new incarnation.
type Client struct {
	c    net.Conn
	h    hello
	sink FactSink

	wm sync.Mutex // serializes writes

	mu      sync.Mutex
	nextReq uint32
	pending map[uint32]chan result
	err     error

	factsInFlight int
	ctx           context.Context
	cancel        context.CancelFunc
	done          chan struct{}
	wg            sync.WaitGroup
	once          sync.Once
}

type factMsg struct {
	n uint64
	f coordwire.TerminalSourceFact
}

var _ coordserver.OwnerAdapter = (*Client)(nil)

// Dial connects to the execowner socket at path and reads its HELLO. sink
// receives the owner's facts (nil acknowledges and discards them);
// its errors are classified like Config.Permanent's default, and a
// transient one is retried by the owner with the same fact. A
// REVISION_CONFLICT "source.binding_ended" reaches the owner as that
// refusal (its own acknowledgement status), so that a CLOSED retried
// after its binding ended is final there without a warning.
func Dial(ctx context.Context, path string, sink FactSink) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if !samePeerUser(c) {
		c.Close()
		return nil, fmt.Errorf("%w: the socket's owner process runs as another user", ErrProtocol)
	}
	// The HELLO is awaited as long as ctx lives.
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	op, body, err := readFrame(c, MaxFrameBytes)
	if !stop() && err != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	if err == nil && op != opHello {
		err = fmt.Errorf("%w: first frame 0x%02x is not HELLO", ErrProtocol, op)
	}
	var h hello
	if err == nil {
		h, err = decodeHello(body)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetReadDeadline(time.Time{})
	cl := &Client{c: c, h: h, sink: sink, pending: make(map[uint32]chan result), done: make(chan struct{})}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	cl.wg.Add(1)
	go cl.read()
	return cl, nil
}

// Fingerprint is the owner authority fingerprint the owner announced.
func (cl *Client) Fingerprint() [32]byte { return cl.h.fp }

// Incarnation is the owner's IncarnationId announced at connect.
func (cl *Client) Incarnation() coordwire.IncarnationID { return cl.h.inc }

// ServesGroup implements coordserver.OwnerAdapter from the HELLO's group.
func (cl *Client) ServesGroup(group []byte) bool { return bytes.Equal(group, cl.h.group) }

// Done is closed when the connection is gone.
func (cl *Client) Done() <-chan struct{} { return cl.done }

// Err is why the connection ended (nil while it lives).
func (cl *Client) Err() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.err
}

// Close closes the connection and waits for the client's goroutines
// (which finish a fact delivery in progress first).
func (cl *Client) Close() error {
	cl.fail(ErrConnLost)
	cl.wg.Wait()
	return nil
}

func (cl *Client) fail(err error) {
	cl.once.Do(func() {
		cl.mu.Lock()
		cl.err = err
		for id, ch := range cl.pending {
			delete(cl.pending, id)
			close(ch)
		}
		cl.mu.Unlock()
		cl.cancel()
		cl.c.Close()
		close(cl.done)
	})
}

func (cl *Client) write(b []byte) error {
	cl.wm.Lock()
	defer cl.wm.Unlock()
	if _, err := cl.c.Write(b); err != nil {
		cl.fail(ErrConnLost)
		return ErrConnLost
	}
	return nil
}

func (cl *Client) read() {
	defer cl.wg.Done()
	r := bufio.NewReader(cl.c)
	for {
		op, body, err := readFrame(r, MaxFrameBytes)
		if err != nil {
			cl.fail(fmt.Errorf("%w: %v", ErrConnLost, err))
			return
		}
		switch op {
		case opResult:
			q, err := decodeResult(body)
			if err != nil {
				cl.fail(err)
				return
			}
			cl.mu.Lock()
			ch := cl.pending[q.req]
			delete(cl.pending, q.req)
			cl.mu.Unlock()
			if ch != nil { // nil: the caller stopped waiting
				ch <- q
			}
		case opFact:
			n, f, err := decodeFact(body)
			if err != nil {
				cl.fail(err)
				return
			}
			// One goroutine per fact: the owner sends the next fact of a
			// binding only after this one's ack, so facts in flight are
			// at most its live bindings, and a slow sink never holds up
			// the RESULT frames behind them.
			cl.mu.Lock()
			over := cl.factsInFlight >= maxFactsInFlight
			if !over {
				cl.factsInFlight++
				cl.wg.Add(1)
			}
			cl.mu.Unlock()
			if over {
				cl.fail(fmt.Errorf("%w: more than %d facts in flight", ErrProtocol, maxFactsInFlight))
				return
			}
			go cl.deliver(factMsg{n, f})
		default:
			cl.fail(fmt.Errorf("%w: unknown op 0x%02x", ErrProtocol, op))
			return
		}
	}
}

// deliver hands one fact to the sink and acknowledges it.
func (cl *Client) deliver(m factMsg) {
	defer cl.wg.Done()
	defer func() {
		cl.mu.Lock()
		cl.factsInFlight--
		cl.mu.Unlock()
	}()
	st := byte(ackAdmitted)
	if cl.sink != nil {
		err := cl.sink(cl.ctx, m.f)
		switch {
		case err == nil:
		case bindingEnded(err):
			st = ackEnded
		case defaultPermanent(err):
			st = ackRefused
		default:
			st = ackRetry
		}
	}
	cl.write(frame(opFactAck, append(coordwire.AppendU64(nil, m.n), st)))
}

// call sends one request and waits for its RESULT.
func (cl *Client) call(ctx context.Context, op byte, build func(req uint32) []byte) (coordserver.EffectOutcome, error) {
	ch := make(chan result, 1)
	cl.mu.Lock()
	if cl.err != nil {
		cl.mu.Unlock()
		return coordserver.EffectOutcome{}, ErrConnLost
	}
	cl.nextReq++
	if cl.nextReq == 0 {
		cl.nextReq = 1
	}
	id := cl.nextReq
	cl.pending[id] = ch
	cl.mu.Unlock()
	if err := cl.write(frame(op, build(id))); err != nil {
		return coordserver.EffectOutcome{}, err
	}
	select {
	case q, ok := <-ch:
		if !ok {
			return coordserver.EffectOutcome{}, ErrConnLost
		}
		switch q.status {
		case stOK:
			return q.out, nil
		case stConflict:
			return coordserver.EffectOutcome{}, coordserver.ErrEffectConflict
		case stUnprovable:
			return coordserver.EffectOutcome{}, coordserver.ErrOutcomeUnprovable
		case stUnknown:
			return coordserver.EffectOutcome{}, coordserver.ErrEffectUnknown
		}
		return coordserver.EffectOutcome{}, &RemoteError{Reason: q.reason}
	case <-ctx.Done():
		cl.mu.Lock()
		delete(cl.pending, id)
		cl.mu.Unlock()
		return coordserver.EffectOutcome{}, ctx.Err()
	}
}

func (cl *Client) check(want coordwire.EffectKind, out coordserver.EffectOutcome, err error) (coordserver.EffectOutcome, error) {
	if err == nil && out.Kind != want {
		cl.fail(fmt.Errorf("%w: result of kind %v for a %v request", ErrProtocol, out.Kind, want))
		return coordserver.EffectOutcome{}, ErrConnLost
	}
	return out, err
}

// Spawn implements coordserver.OwnerAdapter over the socket.
func (cl *Client) Spawn(ctx context.Context, req coordserver.SpawnRequest) (coordserver.SpawnResult, error) {
	out, err := cl.call(ctx, opSpawn, func(id uint32) []byte { return appendSpawn(id, req) })
	out, err = cl.check(coordwire.EffectSpawn, out, err)
	return out.Spawn, err
}

// Kill implements coordserver.OwnerAdapter over the socket.
func (cl *Client) Kill(ctx context.Context, req coordserver.KillRequest) (coordserver.EffectResult, error) {
	out, err := cl.call(ctx, opKill, func(id uint32) []byte { return appendEffect(id, req.Key, req.Binding) })
	out, err = cl.check(coordwire.EffectKill, out, err)
	return out.Effect, err
}

// ProcessSignal implements coordserver.OwnerAdapter over the socket.
func (cl *Client) ProcessSignal(ctx context.Context, req coordserver.SignalRequest) (coordserver.EffectResult, error) {
	out, err := cl.call(ctx, opSignal, func(id uint32) []byte {
		return append(appendEffect(id, req.Key, req.Binding), byte(req.Signal))
	})
	out, err = cl.check(coordwire.EffectProcessSignal, out, err)
	return out.Effect, err
}

// Outcome implements coordserver.OwnerAdapter over the socket.
func (cl *Client) Outcome(ctx context.Context, key coordserver.EffectKey) (coordserver.EffectOutcome, error) {
	return cl.call(ctx, opOutcome, func(id uint32) []byte { return appendKey(coordwire.AppendU32(nil, id), key) })
}
