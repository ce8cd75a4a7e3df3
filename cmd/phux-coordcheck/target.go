package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/workload"
)

// target is the coordinator under test in server mode: where it listens,
// the pins a client needs, the operator's keys and the hooks.
type target struct {
	address      string
	tls          *tls.Config
	keys         [3]edstrict.Signer // --key (required), --key2, --key3
	authorityPin [32]byte
	witnessPub   ed25519.PublicKey
	hooks        *hooks
	wait         time.Duration // bound of one expected frame
	quiet        time.Duration // how long "nothing arrives" is watched
	// connsPerPrincipal is the per-principal connection quota the
	// operator configured (A.3: 16).
	connsPerPrincipal int
	// leasesPerConn and subsPerConn are the per-connection quotas
	// (A.2: 8 and 32).
	leasesPerConn, subsPerConn int
}

// allScopes is every scope bit of 0.1.0; a request of all of them is
// granted the key's registry ceiling.
const allScopes = coordwire.Scope(0x3f)

// allCaps is every capability bit of 0.1.0.
const allCaps = coordwire.Capabilities(0x1f)

// connOpts shapes one authenticated connection.
type connOpts struct {
	key    int             // index into target.keys
	scope  coordwire.Scope // 0: allScopes
	caps   coordwire.Capabilities
	noCaps bool // offer no capability at all
	limits coordwire.Limits
}

// sess is one authenticated raw connection.
type sess struct {
	*rawframe.Conn
	x  *target
	ok *coordwire.CoordHelloOK
}

func (x *target) dial(ctx context.Context) (*rawframe.Conn, error) {
	c, err := rawframe.Dial(ctx, x.address, rawframe.Options{TLS: x.tls, Timeout: x.wait})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", x.address, err)
	}
	context.AfterFunc(ctx, func() { c.Close() })
	return c, nil
}

// needKey skips a test that needs an optional key.
func (x *target) needKey(i int) error {
	if x.keys[i] == nil {
		return skipf("needs --key%d", i+1)
	}
	return nil
}

func (x *target) clientConfig(o connOpts) workload.ClientConfig {
	scope := o.scope
	if scope == 0 {
		scope = allScopes
	}
	caps := o.caps
	if caps == 0 && !o.noCaps {
		caps = allCaps
	}
	return workload.ClientConfig{
		WorkloadKey:                x.keys[o.key],
		PinnedAuthorityFingerprint: x.authorityPin,
		RequestedScope:             scope,
		RequestedExpiry:            time.Now().Add(time.Hour),
		Limits:                     o.limits,
		OfferedCapabilities:        caps,
		ClientName:                 "phux-coordcheck",
	}
}

// connect dials and runs the whole handshake, checking COORD_HELLO_OK as
// a client must (§12: the certificate under the witness pin, its
// coordinator, epoch and incarnation).
func (x *target) connect(ctx context.Context, o connOpts) (*sess, error) {
	if x.keys[o.key] == nil {
		return nil, skipf("needs --key%d", o.key+1)
	}
	c, err := x.dial(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.Handshake(x.clientConfig(o), x.wait); err != nil {
		c.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	ok := c.HelloOK()
	if err := cert.VerifyHelloOK(ok, x.witnessPub, time.Now()); err != nil {
		c.Close()
		return nil, fmt.Errorf("COORD_HELLO_OK's activation certificate does not verify under the witness pin: %w", err)
	}
	return &sess{Conn: c, x: x, ok: ok}, nil
}

func (x *target) connectDefault(ctx context.Context) (*sess, error) {
	return x.connect(ctx, connOpts{})
}

// newObjectiveCommand is a CREATE_OBJECTIVE of a fresh objective with a
// document of n bytes.
func (s *sess) newObjectiveCommand(n int) (*coordwire.CoordCommand, coordwire.ObjectiveID) {
	id := coordwire.NewObjectiveID()
	doc := make([]byte, n)
	_, _ = rand.Read(doc)
	p := &coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: doc}
	return &coordwire.CoordCommand{RequestID: s.NextRequestID(), Guard: s.Guard(), OperationID: coordwire.NewOperationID(),
		Kind: coordwire.CommandCreateObjective, Payload: p.AppendTLV(nil)}, id
}

// again returns a copy of cmd with a fresh request id and the current
// guard.
func (s *sess) again(cmd *coordwire.CoordCommand) *coordwire.CoordCommand {
	c := *cmd
	c.RequestID = s.NextRequestID()
	c.Guard = s.Guard()
	return &c
}

// command sends cmd and requires COORD_COMMAND_RESULT.
func (s *sess) command(cmd *coordwire.CoordCommand) (coordwire.OperationResult, error) {
	if err := s.Send(cmd); err != nil {
		return coordwire.OperationResult{}, err
	}
	r, err := rawframe.ExpectReply[*coordwire.CoordCommandResult](s.Conn, cmd.RequestID, s.x.wait)
	if err != nil {
		return coordwire.OperationResult{}, fmt.Errorf("COORD_COMMAND: %w", err)
	}
	return r.Operation, nil
}

// succeed sends cmd and requires SUCCEEDED.
func (s *sess) succeed(cmd *coordwire.CoordCommand) (coordwire.OperationResult, error) {
	r, err := s.command(cmd)
	if err != nil {
		return r, err
	}
	if r.Tag != coordwire.OperationSucceeded {
		return r, failf("COORD_COMMAND %v: result %v, want SUCCEEDED", cmd.Kind, r.Tag)
	}
	return r, nil
}

// create commits one fresh objective.
func (s *sess) create(n int) (coordwire.ObjectiveID, error) {
	cmd, id := s.newObjectiveCommand(n)
	_, err := s.succeed(cmd)
	return id, err
}

// lookup sends GET_OPERATION_RESULT and returns the reply frame.
func (s *sess) lookup(id coordwire.OperationID) (coordwire.Frame, error) {
	m := &coordwire.GetOperationResult{RequestID: s.NextRequestID(), Guard: s.Guard(), OperationID: id}
	if err := s.Send(m); err != nil {
		return nil, err
	}
	return s.ReadReply(m.RequestID, s.x.wait)
}

// fatal requires a COORD_ERROR with code and then the close.
func (s *sess) fatal(code coordwire.ErrorCode) error { return expectFatal(s.Conn, code, s.x.wait) }

// fatalAny requires a COORD_ERROR with one of codes (where the
// specification names the refusal but not its code) and then the close.
func (s *sess) fatalAny(codes ...coordwire.ErrorCode) error {
	if len(codes) == 1 {
		return s.fatal(codes[0])
	}
	f, err := s.Read(s.x.wait)
	if err != nil {
		return fmt.Errorf("waiting for a fatal COORD_ERROR %v: %w", codes, err)
	}
	e, ok := f.(*coordwire.CoordError)
	if !ok {
		return failf("got %v, want a fatal COORD_ERROR %v", describeFrame(f), codes)
	}
	if !slices.Contains(codes, e.Code) {
		return failf("got COORD_ERROR %v, want one of %v", e.Code, codes)
	}
	if err := checkDiagnostic(e); err != nil {
		return err
	}
	return s.ExpectClosed(s.x.wait)
}

func expectFatal(c *rawframe.Conn, code coordwire.ErrorCode, wait time.Duration) error {
	e, err := c.ExpectFatal(code, wait)
	if err != nil {
		return err
	}
	return checkDiagnostic(e)
}

// requestError requires a request-scoped COORD_ERROR with code for
// reqID and that the connection then still answers a COORD_PING.
func (s *sess) requestError(code coordwire.ErrorCode, reqID uint32) error {
	e, err := s.ExpectError(code, reqID, s.x.wait)
	if err != nil {
		return err
	}
	if err := checkDiagnostic(e); err != nil {
		return err
	}
	return s.alive()
}

// alive requires the connection to answer a COORD_PING.
func (s *sess) alive() error {
	n := uint64(time.Now().UnixNano()) | 1
	if err := s.Send(&coordwire.CoordPing{Nonce: n}); err != nil {
		return fmt.Errorf("the connection did not stay open: %w", err)
	}
	for {
		f, err := s.Read(s.x.wait)
		if err != nil {
			return fmt.Errorf("the connection did not stay open (no COORD_PONG): %w", err)
		}
		if p, ok := f.(*coordwire.CoordPong); ok {
			if p.Nonce != n {
				return failf("COORD_PONG nonce %d, want %d", p.Nonce, n)
			}
			return nil
		}
		if _, ok := f.(*coordwire.CoordEvent); ok {
			continue
		}
		return failf("got %v while waiting for COORD_PONG", describeFrame(f))
	}
}

// checkDiagnostic applies §13 to a COORD_ERROR's message.
func checkDiagnostic(e *coordwire.CoordError) error {
	if len(e.Message) > coordwire.MaxDiagnosticBytes {
		return failf("COORD_ERROR message of %d bytes, above 1,024 (§13)", len(e.Message))
	}
	return nil
}

func describeFrame(f coordwire.Frame) string {
	if e, ok := f.(*coordwire.CoordError); ok {
		return fmt.Sprintf("COORD_ERROR %v (request %d, %q)", e.Code, e.RequestID, e.Message)
	}
	return f.Type().String()
}

// noLeak requires that a diagnostic does not hold a secret or payload.
func noLeak(e *coordwire.CoordError, secrets ...[]byte) error {
	for _, s := range secrets {
		if len(s) >= 8 && bytes.Contains([]byte(e.Message), s) {
			return failf("COORD_ERROR message holds a payload or secret the client sent (§13)")
		}
	}
	return nil
}

// quietFor requires that no frame (other than background ones) arrives
// within d.
func quietFor(c *rawframe.Conn, d time.Duration, what string) error {
	f, err := c.Read(d)
	if err == nil {
		return failf("%s: got %v", what, describeFrame(f))
	}
	if rawframe.IsTimeout(err) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isPeerError reports the code of a *rawframe.PeerError.
func peerCode(err error) (coordwire.ErrorCode, bool) {
	var pe *rawframe.PeerError
	if errors.As(err, &pe) {
		return pe.Frame.Code, true
	}
	return 0, false
}
