package coordclient

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
)

// Client is a connection to one coordinator, re-established on demand: when
// the connection dies (the server closed it, its certificate expired, the
// network failed), the next call dials again with the same Config and the
// same AuthorityMemory, which decides whether the authority it then meets
// continues the one accepted (§12). A Client is safe for concurrent use;
// its calls multiplex over the one connection.
type Client struct {
	cfg  Config
	addr address

	dialSem chan struct{} // one dial at a time

	mu     sync.Mutex
	cur    *conn
	closed bool

	wg sync.WaitGroup // every goroutine of every connection

	// snapRecords is the record count of the last snapshot Snapshot
	// returned: the next one stages into a slice of about that size at
	// once instead of growing one (see listStager).
	snapRecords atomic.Int64
}

// maxAttempts bounds the connections one call uses: a call whose
// connection dies dials again and, if its request may have been sent,
// looks the operation up; it gives up (ErrConnectionLost) after this many
// connections.
const maxAttempts = 3

// Dial connects to the coordinator at address ("unix:PATH" or
// "tls:HOST:PORT"), authenticates with cfg.WorkloadKey, and verifies before
// returning: the authority proof under the pinned authority fingerprint,
// the grant (scope within the request and nonempty, expiry, limits and
// capabilities within the offer), the activation certificate under the
// pinned witness key (signature, key id, lifetime, times) and its match
// with COORD_HELLO_OK (CoordinatorId, epoch, incarnation), and the
// authority memory (a conflict is ErrQuarantined). Every failure is an
// *Error; nothing is retried. ctx bounds the dial and the handshake only.
func Dial(ctx context.Context, addr string, cfg Config) (*Client, error) {
	a, err := parseAddress(addr)
	if err != nil {
		return nil, err
	}
	cfg, err = cfg.normalize()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, addr: a, dialSem: make(chan struct{}, 1)}
	cn, err := handshake(ctx, &c.cfg, a)
	if err != nil {
		return nil, err
	}
	cn.start(&c.wg)
	c.cur = cn
	return c, nil
}

// Close closes the connection and waits for the client's goroutines.
// Calls in progress return ErrClosed. It is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cur := c.cur
	c.mu.Unlock()
	if cur != nil {
		cur.kill(&Error{Op: "close", Reason: "client.closed", kinds: []error{ErrClosed}})
	}
	c.wg.Wait()
	return nil
}

// Authority returns the authority of the current connection's certificate
// (after renewals: same activation, later expiry).
func (c *Client) Authority() AuthorityState {
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	cc := cur.certificate()
	return stateOf(&cc)
}

// Session describes the current connection.
type Session struct {
	// HelloOK is the COORD_HELLO_OK the coordinator sent (its
	// certificate is the first one of the connection).
	HelloOK coordwire.CoordHelloOK
	// Certificate is the current certificate (after any renewal).
	Certificate coordwire.ActivationCertificate
	// Guard is the AuthorityGuard requests carry.
	Guard coordwire.AuthorityGuard
	// Alive reports whether the connection still works.
	Alive bool
}

// Session returns the state of the current connection.
func (c *Client) Session() Session {
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	cc := cur.certificate()
	return Session{HelloOK: cur.hello, Certificate: cc, Guard: cert.Guard(&cc), Alive: cur.alive()}
}

// conn returns a live connection, dialing one if the current one died.
func (c *Client) conn(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &Error{Op: "connection", Reason: "client.closed", kinds: []error{ErrClosed}}
	}
	if cur := c.cur; cur != nil && cur.alive() {
		c.mu.Unlock()
		return cur, nil
	}
	c.mu.Unlock()
	select {
	case c.dialSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxErr("connection", ctx.Err())
	}
	defer func() { <-c.dialSem }()
	c.mu.Lock()
	if cur := c.cur; !c.closed && cur != nil && cur.alive() { // another caller redialled
		c.mu.Unlock()
		return cur, nil
	}
	c.mu.Unlock()
	cn, err := handshake(ctx, &c.cfg, c.addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed { // Close ran meanwhile: this connection never starts
		cn.nc.Close()
		return nil, &Error{Op: "connection", Reason: "client.closed", kinds: []error{ErrClosed}}
	}
	cn.start(&c.wg) // under mu: Close (which sets closed under mu) waits for it
	c.cur = cn
	return cn, nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func ctxErr(op string, err error) error {
	return &Error{Op: op, Reason: "context", err: err}
}

// lostErr is the error of a call that could not learn its outcome: the
// death of its last connection (its code and sentinels) plus
// ErrConnectionLost.
func lostErr(op string, death, cause error) error {
	e := &Error{Op: op, Reason: "client.reply_lost", kinds: []error{ErrConnectionLost}, err: cause}
	var d *Error
	if errors.As(death, &d) {
		e.Code = d.Code
		e.kinds = append(e.kinds, d.kinds...)
	}
	return e
}

// Command submits cmd and returns its typed result.
//
// SUCCEEDED and PENDING return a Result and nil (wait for a PENDING one
// with WaitFinal). A durable REJECTED returns the Result and an *Error
// with the stored code (ErrRejected; ErrOperationConflict etc. by code);
// INDETERMINATE returns ErrIndeterminate; a request-scoped COORD_ERROR
// (OPERATION_CONFLICT, REVISION_CONFLICT, SCOPE_DENIED, NOT_FOUND, ...)
// returns no Result and its code. A fatal refusal of the request
// (STALE_AUTHORITY, AUTHORITY_FENCED, ...) returns its sentinel: nothing
// was admitted, and the connection is closed; calling Command again with
// the same cmd reconnects and retries the same id.
//
// When the connection dies after the command was written, the reply is
// lost: Command reconnects and looks the same OperationId up
// (GET_OPERATION_RESULT); an UNKNOWN answer is ErrUnknownOperation and
// the command is not resent. When the id is admitted, the stored state
// may be another command's (the id reused with another payload:
// GET_OPERATION_RESULT carries no digest), so Command sends the same
// command once more to confirm: the id is taken, so this admits nothing
// new — the coordinator answers an exact duplicate with the stored
// state and anything else with OPERATION_CONFLICT (§8). A command that
// never left (the connection was already dead) is sent on the new
// connection. When ctx ends first, Command returns ctx's error: the
// outcome is then unknown to the caller, who may look it up
// (OperationResult) or submit the same cmd again.
func (c *Client) Command(ctx context.Context, cmd *Cmd) (*Result, error) {
	if cmd == nil {
		return nil, codeErr("command", coordwire.MalformedMessage, "command.nil", nil)
	}
	if cmd.err != nil {
		return nil, cmd.err
	}
	var death error
	confirm := false // the id is admitted: the next send confirms whose it is
	for attempt := 0; attempt < maxAttempts+1; attempt++ {
		if attempt == maxAttempts && !confirm {
			break
		}
		cn, err := c.conn(ctx)
		if err != nil {
			if death == nil {
				return nil, err
			}
			return nil, lostErr("command", death, err)
		}
		if err := cmd.checkLimits(cn.hello.Limits); err != nil {
			return nil, err
		}
		r, sent, err := cn.roundTrip(ctx, coordwire.TypeCoordCommandResult, func(id uint32, g coordwire.AuthorityGuard) coordwire.Frame {
			return cmd.frame(id, g)
		})
		switch {
		case err == nil && r.cerr != nil:
			if r.cerr.Code == coordwire.Internal {
				// A fatal INTERNAL says nothing about admission: look up.
				death = remoteErr("command", r.cerr)
				res, err, again := c.afterLoss(ctx, cmd, death, attempt+1)
				if !again {
					return res, err
				}
				confirm = true
				continue
			}
			return nil, remoteErr("command", r.cerr)
		case err == nil:
			return newResult("command", cmd.id, r.op)
		case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			return nil, ctxErr("command", err)
		case c.isClosed():
			return nil, &Error{Op: "command", Reason: "client.closed", kinds: []error{ErrClosed}}
		case errors.Is(err, errNotSent):
			if cd := cn.deathErr(); cd != nil {
				death = cd
			}
			continue // never left: send it on the next connection
		case !sent:
			return nil, err // refused locally before any byte was written
		default:
			death = err
			res, err, again := c.afterLoss(ctx, cmd, err, attempt+1)
			if !again {
				return res, err
			}
			confirm = true
		}
	}
	return nil, lostErr("command", death, nil)
}

// afterLoss reconnects and looks cmd's id up after its reply was lost. It
// returns the outcome to report, or again when the id is admitted and
// the stored state must be confirmed as cmd's by sending cmd once more
// (see Command). A TOMBSTONED state names its command's digest, which
// decides at once.
func (c *Client) afterLoss(ctx context.Context, cmd *Cmd, death error, used int) (res *Result, err error, again bool) {
	c.cfg.Logger.Debug("coordclient: reply lost, looking the operation up", "operation_id", cmd.id.String())
	res, err = c.lookup(ctx, cmd.id, death, maxAttempts-used+1)
	if res == nil && err != nil && !errors.Is(err, ErrConnectionLost) && !errors.Is(err, ErrClosed) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		// The lookup was refused (a fatal AUTHORITY_FENCED, say): that
		// is the lookup's refusal, not the command's, whose outcome
		// stays unknown.
		return nil, lostErr("command", death, err), false
	}
	if res == nil || res.Operation.Tag == coordwire.OperationUnknown {
		return res, err, false
	}
	if res.Operation.Tag == coordwire.OperationTombstoned {
		if d, derr := cmd.Digest(); derr == nil && d != res.Operation.CommandDigest {
			return nil, &Error{Op: "command", Code: coordwire.OperationConflict, Reason: "operation.conflict_after_loss", kinds: sentinelFor(coordwire.OperationConflict)}, false
		}
		return res, err, false
	}
	return nil, nil, true
}

// OperationResult looks an operation up by id (GET_OPERATION_RESULT) and
// returns its typed result, with the error its tag calls for (as for
// Command): nil for SUCCEEDED and PENDING, ErrRejected, ErrIndeterminate,
// ErrTombstoned, ErrUnknownOperation; an invisible operation (another
// principal's) is NOT_FOUND. A lookup is read-only, so a lost reply is
// retried on a new connection.
func (c *Client) OperationResult(ctx context.Context, id coordwire.OperationID) (*Result, error) {
	if id.IsZero() {
		return nil, codeErr("lookup", coordwire.MalformedMessage, "id.zero", nil)
	}
	return c.lookup(ctx, id, nil, maxAttempts)
}

func (c *Client) lookup(ctx context.Context, id coordwire.OperationID, death error, attempts int) (*Result, error) {
	for range max(attempts, 1) {
		cn, err := c.conn(ctx)
		if err != nil {
			if death == nil {
				return nil, err
			}
			return nil, lostErr("lookup", death, err)
		}
		r, _, err := cn.roundTrip(ctx, coordwire.TypeOperationResult, func(rid uint32, g coordwire.AuthorityGuard) coordwire.Frame {
			return &coordwire.GetOperationResult{RequestID: rid, Guard: g, OperationID: id}
		})
		switch {
		case err == nil && r.cerr != nil:
			if r.cerr.Code == coordwire.Internal {
				death = remoteErr("lookup", r.cerr)
				continue
			}
			return nil, remoteErr("lookup", r.cerr)
		case err == nil:
			return newResult("lookup", id, r.op)
		case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			return nil, ctxErr("lookup", err)
		case c.isClosed():
			return nil, &Error{Op: "lookup", Reason: "client.closed", kinds: []error{ErrClosed}}
		default:
			if cd := cn.deathErr(); cd != nil {
				death = cd
			} else {
				death = err
			}
		}
	}
	return nil, lostErr("lookup", death, nil)
}

// Polling schedule of WaitFinal.
const (
	waitFinalFirst = 50 * time.Millisecond
	waitFinalMax   = 2 * time.Second
)

// WaitFinal waits until the operation id leaves PENDING and returns its
// final result (with the error its tag calls for, as OperationResult). In
// this slice it polls GET_OPERATION_RESULT with exponential backoff and
// jitter (50 ms doubling to 2 s); a later issue completes it on
// OPERATION_CHANGED events instead. UNKNOWN is returned at once
// (ErrUnknownOperation), never waited on.
func (c *Client) WaitFinal(ctx context.Context, id coordwire.OperationID) (*Result, error) {
	delay := waitFinalFirst
	for {
		r, err := c.OperationResult(ctx, id)
		if err != nil || r.Tag() != coordwire.OperationPending {
			return r, err
		}
		d := delay/2 + time.Duration(mrand.Int64N(int64(delay/2)+1))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return r, ctxErr("lookup", ctx.Err())
		}
		delay = min(delay*2, waitFinalMax)
	}
}

// Ping sends COORD_PING on the current connection and waits for its
// COORD_PONG: liveness only (§7).
func (c *Client) Ping(ctx context.Context) error {
	cn, err := c.conn(ctx)
	if err != nil {
		return err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	err = cn.ping(ctx, binary.BigEndian.Uint64(b[:]))
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctxErr("ping", err)
	case errors.Is(err, errNotSent):
		return lostErr("ping", cn.deathErr(), nil)
	}
	return wrapErr("ping", err)
}
