package witness

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/atomicfile"
)

// DefaultLifetime is the certificate lifetime when Config.Lifetime is zero.
const DefaultLifetime = 30 * time.Second

// HookPoint names a point in the durable write path, for fault-injection
// tests (Config.Hook).
type HookPoint string

// Hook points, in the order a decision passes them.
const (
	// HookBeforeWrite: the decision is made, nothing is written yet.
	HookBeforeWrite HookPoint = "before-write"
	// HookTempWritten: the new state is written to a temporary file that
	// is neither fsynced nor renamed (atomicfile.StageTempWritten); the
	// state file holds the old state.
	HookTempWritten HookPoint = HookPoint(atomicfile.StageTempWritten)
	// HookTempSynced: the temporary file is fsynced but not renamed
	// (atomicfile.StageTempSynced); the state file holds the old state.
	HookTempSynced HookPoint = HookPoint(atomicfile.StageTempSynced)
	// HookRenamed: the temporary file is renamed over the state file,
	// which holds the new state; the directory is not fsynced yet
	// (atomicfile.StageRenamed).
	HookRenamed HookPoint = HookPoint(atomicfile.StageRenamed)
	// HookAfterWrite: the new state is durable (renamed, directory
	// synced); the reply is not sent yet.
	HookAfterWrite HookPoint = "after-write"
)

// ErrConfig is returned by Open for an unusable Config.
var ErrConfig = errors.New("witness: invalid configuration")

// Config configures a witness Server.
type Config struct {
	// StateDir is the owner-only directory holding the state file
	// (created by Init). Required.
	StateDir string
	// Lifetime is the lifetime of every certificate issued: whole
	// seconds, 1 s to 60 s. Zero means DefaultLifetime (30 s).
	Lifetime time.Duration
	// RequireEnrolment refuses ACTIVATE for a CoordinatorId the operator
	// has not enrolled (ENROL on the admin socket). When false (the
	// default) the first ACTIVATE pins the signing key's fingerprint.
	RequireEnrolment bool
	// IdleTimeout closes a connection that sends no request for this
	// long. Zero means 2 minutes.
	IdleTimeout time.Duration
	// MaxConns caps concurrent connections (coordinator and admin
	// together); a connection over the cap is closed at once. Zero means
	// 256.
	MaxConns int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives operational logs (never keys, tokens, nonces or
	// signatures); nil discards them.
	Logger *slog.Logger
	// Hook, if set, is called at each HookPoint of every durable write.
	// It exists for crash tests; leave it nil.
	Hook func(HookPoint)
}

// Server is a phux-witness/1 server over one state directory. It holds
// the directory's lock from Open to Close.
type Server struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	lifetime uint64
	idle     time.Duration
	maxConns int
	unlock   func()

	mu     sync.Mutex // serialises decisions and guards st, failed
	st     *state
	priv   ed25519.PrivateKey
	id     Identity
	failed error

	connMu    sync.Mutex
	conns     map[net.Conn]struct{}
	listeners map[net.Listener]struct{}
	closed    bool
	done      chan struct{}
	wg        sync.WaitGroup
}

// Open loads the state of an initialised witness and locks its directory.
// A missing state file is ErrNotInitialised; a corrupt one
// ErrStateCorrupt; an unknown version ErrStateVersion; another live
// witness on the directory ErrLocked. It never starts from empty state.
func Open(cfg Config) (*Server, error) {
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("%w: StateDir is required", ErrConfig)
	}
	life := cfg.Lifetime
	if life == 0 {
		life = DefaultLifetime
	}
	if life < time.Second || life > cert.MaxLifetime*time.Second || life%time.Second != 0 {
		return nil, fmt.Errorf("%w: Lifetime must be whole seconds from 1s to 60s", ErrConfig)
	}
	if err := atomicfile.CheckDir(cfg.StateDir); err != nil {
		return nil, err
	}
	unlock, err := lockDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	st, err := loadState(cfg.StateDir)
	if err != nil {
		unlock()
		return nil, err
	}
	removeStaleTemps(cfg.StateDir)
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		now:       cfg.Now,
		lifetime:  uint64(life / time.Second),
		idle:      cfg.IdleTimeout,
		unlock:    unlock,
		st:        st,
		priv:      st.privateKey(),
		id:        st.identity(),
		conns:     map[net.Conn]struct{}{},
		listeners: map[net.Listener]struct{}{},
		done:      make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.idle == 0 {
		s.idle = 2 * time.Minute
	}
	s.maxConns = cfg.MaxConns
	if s.maxConns <= 0 {
		s.maxConns = 256
	}
	return s, nil
}

// Identity returns the witness id, public key and the key id to pin.
func (s *Server) Identity() Identity { return s.id }

// Serve accepts coordinator connections on l until ctx ends or Close is
// called; it then closes l and returns nil. Other accept errors are
// returned.
func (s *Server) Serve(ctx context.Context, l net.Listener) error { return s.serve(ctx, l, false) }

// ServeAdmin accepts operator connections on l (a Unix socket; each peer
// must run as this process's uid, checked with peer credentials). Only
// these connections may send REVOKE and ENROL, and send STATUS unsigned.
func (s *Server) ServeAdmin(ctx context.Context, l net.Listener) error {
	return s.serve(ctx, l, true)
}

func (s *Server) serve(ctx context.Context, l net.Listener, admin bool) error {
	s.connMu.Lock()
	if s.closed {
		s.connMu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.connMu.Unlock()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if admin && !peerIsOwner(c) {
			s.log.Warn("admin connection refused: peer is not the owner")
			WriteFrame(c, &ErrorFrame{Code: NotAdmin, Message: "peer is not the witness owner"})
			c.Close()
			continue
		}
		s.ServeConn(ctx, c, admin)
	}
}

// ServeConn serves one connection in a new goroutine (tracked by Close)
// and returns at once. admin grants the operator requests; pass false for
// anything but an authenticated owner connection.
func (s *Server) ServeConn(ctx context.Context, c net.Conn, admin bool) {
	s.connMu.Lock()
	if s.closed || len(s.conns) >= s.maxConns {
		full := !s.closed
		s.connMu.Unlock()
		if full {
			s.log.Warn("connection refused: too many connections")
		}
		c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.connMu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.connMu.Lock()
			delete(s.conns, c)
			s.connMu.Unlock()
			c.Close()
		}()
		stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
		s.handle(ctx, c, admin)
	}()
}

// Close stops every listener, lets each connection finish the request it
// is handling (its reply is sent), closes the connections, waits for their
// goroutines and releases the state directory.
func (s *Server) Close() error {
	s.connMu.Lock()
	if s.closed {
		s.connMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		// Unblocks a connection waiting for its next request; one in the
		// middle of a decision finishes it and fails its next read.
		c.SetReadDeadline(time.Unix(1, 0))
	}
	s.connMu.Unlock()
	s.wg.Wait()
	s.unlock()
	return nil
}

func (s *Server) handle(ctx context.Context, c net.Conn, admin bool) {
	var nonce [32]byte
	for nonce == ([32]byte{}) { // nonces are never all-zero (ADDENDUM B.3)
		rand.Read(nonce[:])
	}
	hello := &Hello{Protocol: ProtocolName, WitnessID: s.id.WitnessID, Nonce: nonce}
	copy(hello.WitnessPublicKey[:], s.id.PublicKey)
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := WriteFrame(c, hello); err != nil {
		return
	}
	var seq uint64
	for {
		c.SetReadDeadline(time.Now().Add(s.idle))
		select {
		case <-s.done: // Close or ctx ran; their deadline may have been overwritten above
			return
		case <-ctx.Done():
			return
		default:
		}
		f, err := ReadFrame(c)
		if err != nil {
			var we *Error
			if errors.As(err, &we) {
				s.log.Info("request refused", "code", we.Code.String(), "reason", we.Message)
				s.reply(c, &ErrorFrame{Code: we.Code, Message: we.Message})
			} else if !errors.Is(err, io.EOF) && !isTimeout(err) {
				s.log.Debug("connection ended", "err", err)
			}
			return
		}
		req, ok := f.(*Request)
		var out Frame
		var rerr *Error
		switch {
		case !ok:
			rerr = refuse(ProtocolViolation, "expected a request frame")
		case req.RequestSeq != seq+1:
			rerr = refuse(ProtocolViolation, "request_seq is not the next on this connection")
		default:
			seq++
			out, rerr = s.request(req, nonce, admin)
		}
		if rerr != nil {
			op := "?"
			if ok {
				op = req.Op.String()
			}
			s.log.Info("request refused", "op", op, "code", rerr.Code.String(), "reason", rerr.Message)
			out = &ErrorFrame{Code: rerr.Code, Message: rerr.Message}
		}
		if err := s.reply(c, out); err != nil || (rerr != nil && rerr.Code.fatal()) {
			return
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Server) reply(c net.Conn, f Frame) error {
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return WriteFrame(c, f)
}

// request authenticates and runs one request.
func (s *Server) request(req *Request, nonce [32]byte, admin bool) (Frame, *Error) {
	switch req.Op {
	case TypeRevoke, TypeEnrol:
		if !admin {
			return nil, refuse(NotAdmin, "operator request on the coordinator socket")
		}
	}
	if !admin && !req.Signed() {
		return nil, refuse(BadSignature, "request is not signed")
	}
	if req.Signed() {
		pub, err := edstrict.ParsePublicKey(req.AuthorityPublicKey[:])
		if err != nil {
			return nil, refuse(BadSignature, "unusable authority key")
		}
		var buf [512]byte
		if edstrict.Check(pub, req.SigningImage(buf[:0], nonce), req.Signature[:]) != nil {
			return nil, refuse(BadSignature, "signature does not verify for this connection")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return nil, refuse(Internal, "witness state write failed earlier; restart the witness")
	}
	now := uint64(max(s.now().Unix(), 0))
	switch req.Op {
	case TypeActivate:
		return s.activate(req, now)
	case TypeRenew:
		return s.renew(req, now)
	case TypeRelinquish:
		return s.relinquish(req, now)
	case TypeStatus:
		return s.status(req, now)
	case TypeRevoke:
		return s.revoke(req)
	case TypeEnrol:
		return s.enrol(req, now)
	}
	return nil, refuse(ProtocolViolation, "unknown request")
}

// pinned checks the signing key against the record's pin.
func pinned(rec *record, req *Request) *Error {
	fp := sha256.Sum256(req.AuthorityPublicKey[:])
	if !rec.Pinned || rec.Fingerprint != fp {
		return refuse(FingerprintMismatch, "signing key is not the pinned authority key")
	}
	return nil
}

func (s *Server) activate(req *Request, now uint64) (Frame, *Error) {
	fp := sha256.Sum256(req.AuthorityPublicKey[:])
	rec := s.st.Records[req.CoordinatorID]
	var nr *record
	switch {
	case rec == nil:
		if s.cfg.RequireEnrolment {
			return nil, refuse(UnknownCoordinator, "coordinator is not enrolled")
		}
		if len(s.st.Records) >= MaxCoordinators {
			return nil, refuse(Internal, "too many coordinators")
		}
		nr = &record{ID: req.CoordinatorID, Pinned: true, Fingerprint: fp}
	case !rec.Pinned:
		if s.cfg.RequireEnrolment {
			return nil, refuse(UnknownCoordinator, "coordinator is not enrolled")
		}
		nr = rec.clone()
		nr.Pinned, nr.Fingerprint = true, fp
	default:
		if err := pinned(rec, req); err != nil {
			return nil, err
		}
		nr = rec.clone()
	}
	if l := nr.Lease; l != nil && now < l.ExpiresAt {
		return nil, refuse(LeaseHeld, "an unexpired lease exists")
	}
	if uint64(req.AuthorityEpoch) <= nr.LastEpoch {
		return nil, refuse(EpochNotGreater, "proposed epoch is not greater than the witness's last epoch")
	}
	if nr.Sequence == math.MaxUint64 {
		return nil, refuse(SequenceExhausted, "activation sequence exhausted")
	}
	if nr.Lease != nil {
		nr.spend(sha256.Sum256(nr.Lease.Token[:]), false)
	}
	var token [32]byte
	rand.Read(token[:])
	nr.LastEpoch = uint64(req.AuthorityEpoch)
	nr.Sequence++
	nr.Lease = &lease{
		Token:        token,
		HolderSHA256: req.HolderSecretSHA256,
		Incarnation:  req.IncarnationID,
		IssuedAt:     now,
		ExpiresAt:    now + s.lifetime,
	}
	c, cerr := s.issue(nr, now)
	if cerr != nil {
		return nil, cerr
	}
	if err := s.commit(nr); err != nil {
		return nil, err
	}
	s.log.Info("activation granted", "coordinator", nr.ID.String(), "epoch", nr.LastEpoch,
		"activation_sequence", nr.Sequence, "expires_at", c.ExpiresAt)
	return &Granted{Certificate: c}, nil
}

func (s *Server) issue(nr *record, now uint64) (coordwire.ActivationCertificate, *Error) {
	c, err := cert.Issue(cert.Grant{
		WitnessID:          s.id.WitnessID,
		CoordinatorID:      nr.ID,
		ActivationSequence: coordwire.ActivationSequence(nr.Sequence),
		AuthorityEpoch:     coordwire.AuthorityEpoch(nr.LastEpoch),
		IncarnationID:      nr.Lease.Incarnation,
		FencingToken:       nr.Lease.Token,
	}, now, s.lifetime, s.priv)
	if err != nil {
		return c, refuse(Internal, "cannot issue certificate")
	}
	return c, nil
}

// liveLease finds the record and its lease for RENEW and RELINQUISH,
// checking the pin and the spent list.
func (s *Server) leaseRecord(req *Request, tokenHash [32]byte) (*record, *Error) {
	rec := s.st.Records[req.CoordinatorID]
	if rec == nil {
		return nil, refuse(UnknownCoordinator, "no record for this coordinator")
	}
	if err := pinned(rec, req); err != nil {
		return nil, err
	}
	if sp, ok := rec.spent(tokenHash); ok {
		if sp.Revoked {
			return rec, refuse(Revoked, "the lease was revoked")
		}
		return rec, refuse(NoLease, "the token is spent")
	}
	if rec.Lease == nil {
		return rec, refuse(NoLease, "no lease")
	}
	return rec, nil
}

func (s *Server) checkLease(rec *record, req *Request, tokenHash [32]byte) *Error {
	l := rec.Lease
	if tokenHash != sha256.Sum256(l.Token[:]) {
		return refuse(TokenMismatch, "fencing token is not the lease's")
	}
	if uint64(req.AuthorityEpoch) != rec.LastEpoch || uint64(req.ActivationSequence) != rec.Sequence ||
		req.IncarnationID != l.Incarnation {
		return refuse(LeaseMismatch, "epoch, activation sequence or incarnation is not the lease's")
	}
	if sha256.Sum256(req.HolderSecret[:]) != l.HolderSHA256 {
		return refuse(TokenMismatch, "holder secret is not the lease's")
	}
	return nil
}

func (s *Server) renew(req *Request, now uint64) (Frame, *Error) {
	rec, err := s.leaseRecord(req, req.FencingTokenSHA256)
	if err != nil {
		return nil, err
	}
	if err := s.checkLease(rec, req, req.FencingTokenSHA256); err != nil {
		return nil, err
	}
	if now >= rec.Lease.ExpiresAt {
		return nil, refuse(NoLease, "the lease has expired")
	}
	nr := rec.clone()
	nr.Lease.IssuedAt = now
	// Never shorten the recorded lease (a clock stepped backwards must
	// not let a new activation in before an issued certificate expires).
	nr.Lease.ExpiresAt = max(nr.Lease.ExpiresAt, now+s.lifetime)
	c, cerr := s.issue(nr, now)
	if cerr != nil {
		return nil, cerr
	}
	if err := s.commit(nr); err != nil {
		return nil, err
	}
	s.log.Debug("lease renewed", "coordinator", nr.ID.String(), "epoch", nr.LastEpoch,
		"activation_sequence", nr.Sequence, "expires_at", c.ExpiresAt)
	return &Granted{Certificate: c}, nil
}

func (s *Server) relinquish(req *Request, now uint64) (Frame, *Error) {
	th := sha256.Sum256(req.FencingToken[:])
	rec, err := s.leaseRecord(req, th)
	if err != nil {
		if err.Code == NoLease && rec != nil {
			if sp, ok := rec.spent(th); ok && !sp.Revoked {
				// Already spent: the reply to an earlier RELINQUISH was lost.
				return &Relinquished{CoordinatorID: rec.ID, ActivationSequence: req.ActivationSequence}, nil
			}
		}
		return nil, err
	}
	if err := s.checkLease(rec, req, th); err != nil {
		return nil, err
	}
	nr := rec.clone()
	nr.spend(th, false)
	nr.Lease = nil
	if err := s.commit(nr); err != nil {
		return nil, err
	}
	s.log.Info("lease relinquished", "coordinator", nr.ID.String(), "epoch", nr.LastEpoch,
		"activation_sequence", nr.Sequence)
	return &Relinquished{CoordinatorID: nr.ID, ActivationSequence: coordwire.ActivationSequence(nr.Sequence)}, nil
}

func (s *Server) status(req *Request, now uint64) (Frame, *Error) {
	rec := s.st.Records[req.CoordinatorID]
	if rec == nil {
		return nil, refuse(UnknownCoordinator, "no record for this coordinator")
	}
	if req.Signed() {
		if err := pinned(rec, req); err != nil {
			return nil, err
		}
	}
	st := &Status{
		CoordinatorID:        rec.ID,
		Pinned:               rec.Pinned,
		AuthorityFingerprint: rec.Fingerprint,
		LastAuthorityEpoch:   rec.LastEpoch,
		ActivationSequence:   rec.Sequence,
		WitnessTime:          now,
	}
	if l := rec.Lease; l != nil {
		st.HasLease = true
		st.LeaseIncarnationID = l.Incarnation
		st.LeaseTokenSHA256 = sha256.Sum256(l.Token[:])
		st.LeaseIssuedAt = l.IssuedAt
		st.LeaseExpiresAt = l.ExpiresAt
	} else if n := len(rec.Spent); n > 0 {
		st.Revoked = rec.Spent[n-1].Revoked
	}
	return st, nil
}

func (s *Server) revoke(req *Request) (Frame, *Error) {
	rec := s.st.Records[req.CoordinatorID]
	if rec == nil {
		return nil, refuse(UnknownCoordinator, "no record for this coordinator")
	}
	nr := rec.clone()
	if nr.Lease != nil {
		nr.spend(sha256.Sum256(nr.Lease.Token[:]), true)
		nr.Lease = nil
	}
	if req.Unpin {
		nr.Pinned, nr.Fingerprint = false, [32]byte{}
	}
	if err := s.commit(nr); err != nil {
		return nil, err
	}
	s.log.Warn("lease revoked by operator", "coordinator", nr.ID.String(), "unpinned", req.Unpin)
	return &AdminOK{CoordinatorID: nr.ID}, nil
}

func (s *Server) enrol(req *Request, now uint64) (Frame, *Error) {
	rec := s.st.Records[req.CoordinatorID]
	var nr *record
	if rec == nil {
		if len(s.st.Records) >= MaxCoordinators {
			return nil, refuse(Internal, "too many coordinators")
		}
		nr = &record{ID: req.CoordinatorID}
	} else {
		if l := rec.Lease; l != nil && now < l.ExpiresAt && rec.Fingerprint != req.AuthorityFingerprint {
			return nil, refuse(LeaseHeld, "revoke the live lease before replacing the authority key")
		}
		nr = rec.clone()
	}
	nr.Pinned, nr.Fingerprint = true, req.AuthorityFingerprint
	if err := s.commit(nr); err != nil {
		return nil, err
	}
	s.log.Info("coordinator enrolled", "coordinator", nr.ID.String())
	return &AdminOK{CoordinatorID: nr.ID}, nil
}

// commit makes nr durable (the whole state file, atomically) and only
// then installs it in memory. A failed write stops every later decision:
// the file may or may not hold the new state, so memory cannot be trusted
// to match it until a restart reloads it.
func (s *Server) commit(nr *record) *Error {
	ns := &state{WitnessID: s.st.WitnessID, Seed: s.st.Seed, Records: maps.Clone(s.st.Records)}
	ns.Records[nr.ID] = nr
	img := encodeState(ns)
	defer clear(img)
	if s.cfg.Hook != nil {
		s.cfg.Hook(HookBeforeWrite)
	}
	var stageHook func(atomicfile.Stage)
	if s.cfg.Hook != nil {
		stageHook = func(st atomicfile.Stage) { s.cfg.Hook(HookPoint(st)) }
	}
	if err := atomicfile.WriteFileWithHook(s.cfg.StateDir, StateFileName, img, stageHook); err != nil {
		s.failed = err
		s.log.Error("witness state write failed; refusing further decisions", "err", err)
		return refuse(Internal, "state write failed")
	}
	if s.cfg.Hook != nil {
		s.cfg.Hook(HookAfterWrite)
	}
	s.st = ns
	return nil
}
