package witness

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/internal/peercred"
	"github.com/phuxcoord/coord/internal/redact"
)

// DefaultLifetime is the certificate lifetime when Config.Lifetime is zero.
const DefaultLifetime = 30 * time.Second

// DefaultEstablishAfter is Config.EstablishAfter when it is zero.
const DefaultEstablishAfter = time.Hour

// MaxFirstUseEpochStep is how far above the witness's last epoch for it
// a coordinator that is not established and was pinned by first use may
// propose an epoch (EPOCH_TOO_FAR above it). Its record is reclaimable,
// and a reclaimed record's epoch becomes the floor of every CoordinatorId
// of its bucket; without a bound one ACTIVATE at epoch 2^64−1 would leave
// them no epoch to propose.
const MaxFirstUseEpochStep = 1 << 20

// maxPinSources caps the first-use sources whose budgets the witness
// tracks at once (see Config.FirstUsePinsPerMinute).
const maxPinSources = 1024

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
	// has not enrolled (ENROL on the admin socket), on every transport.
	// When false (the default) the first ACTIVATE pins the signing key's
	// fingerprint, but only on a local connection: a Unix socket (owner
	// only: the daemon creates it 0600) or an in-process net.Pipe. On TLS
	// and every network transport enrolment is always required unless
	// FirstUseAnyTransport is set.
	RequireEnrolment bool
	// FirstUseAnyTransport allows first-use pinning on connections that
	// are not local (TLS, TCP). Leave it false: any network
	// peer could then fill the coordinator table.
	FirstUseAnyTransport bool
	// FirstUsePinsPerMinute caps the rate of first-use pins (ACTIVATEs
	// that pin a key) per source: each source has a token bucket of this
	// many pins refilled evenly over a minute, and a pin over its
	// source's rate is refused with BUSY. A source is the peer's uid on a
	// Unix socket (peer credentials), the remote IP address on TCP/TLS
	// (its /64 for IPv6) and one shared source for anything else (an
	// in-process pipe), so a peer that spends its budget leaves every
	// other source's intact. Zero means 60; negative is ErrConfig.
	FirstUsePinsPerMinute int
	// EstablishAfter is how long one activation must have lasted — a
	// RENEW of it granted at least this long after its ACTIVATE — for the
	// coordinator's record to become established. A record pinned by
	// first use that is not established is reclaimable when the table is
	// full and its lease is not live; an established or enrolled one
	// never is. Zero means DefaultEstablishAfter (1 h); negative is
	// ErrConfig.
	EstablishAfter time.Duration
	// MaxCoordinators caps the coordinator records, at most (and by
	// default, when zero) the package's MaxCoordinators; negative or
	// above it is ErrConfig. For a smaller witness and for tests.
	MaxCoordinators int
	// IdleTimeout closes an authenticated connection that sends no
	// request for this long. Zero means 2 minutes.
	IdleTimeout time.Duration
	// UnauthRefusals is the refusal budget of a connection that has not
	// yet authenticated: the refusal that spends it closes the
	// connection. Zero means 4; negative is ErrConfig.
	UnauthRefusals int
	// AuthTimeout is the hard lifetime of a connection that has not yet
	// authenticated (a request signed by a pinned authority key, or an
	// owner's admin connection): counted from accept, never reset by
	// requests. Zero means 10 seconds.
	AuthTimeout time.Duration
	// MaxConns caps concurrent connections (coordinator and admin
	// together). Zero means 256; negative is ErrConfig.
	MaxConns int
	// ReservedConns is the share of MaxConns that only authenticated
	// connections may hold: at most MaxConns − ReservedConns connections
	// are unauthenticated at once, and a new connection over that share
	// evicts the oldest unauthenticated one (with ERROR BUSY) if it is at
	// least AuthTimeout/10 old. Otherwise, and when every slot is held by
	// an authenticated connection, a new one gets ERROR BUSY and is
	// closed. Zero means MaxConns/4; an explicit value must be below
	// MaxConns; negative is ErrConfig.
	ReservedConns int
	// MaxUnauthPerHost caps the unauthenticated connections from one IP
	// address (TCP and TLS connections; Unix sockets and pipes are not
	// counted per host). A newcomer over its host's cap evicts that
	// host's oldest unauthenticated connection (if at least
	// AuthTimeout/10 old) instead of another host's, or gets BUSY — so a
	// flood from one address churns only its own connections. Zero means
	// an eighth of the unauthenticated share (at least 1); negative is
	// ErrConfig.
	MaxUnauthPerHost int
	// LogBurst and LogInterval rate-limit the log lines of refusals:
	// at most LogBurst lines per reason per LogInterval, then one line
	// "log lines suppressed" with the count. Zero means 10 lines per
	// minute.
	LogBurst    int
	LogInterval time.Duration
	// Now is the clock of decisions; nil means time.Now.
	Now func() time.Time
	// Rand is the source of the fencing tokens of ACTIVATE; nil means
	// crypto/rand, and production must leave it nil (a token is a
	// secret). A deterministic reader is for tests and the recorded
	// conformance vectors only; it must be safe for concurrent use and
	// never fail (a read error panics).
	Rand io.Reader
	// Logger receives operational logs (never keys, tokens, nonces or
	// signatures); nil discards them.
	Logger *slog.Logger
	// Hook, if set, is called at each HookPoint of every durable write.
	// It exists for crash tests; leave it nil.
	Hook func(HookPoint)
}

// Server is a phux-witness/1 server over one state directory. It holds
// the directory's lock from Open to Close. Formatting, logging or
// marshalling a Server shows only its witness id and state directory.
type Server struct {
	cfg         Config
	log         *slog.Logger
	rl          *logLimiter
	now         func() time.Time
	lifetime    uint64
	establish   uint64 // Config.EstablishAfter in whole seconds
	maxRecords  int
	pinRate     int
	idle        time.Duration
	authTimeout time.Duration
	refusals    int
	maxConns    int
	maxUnauth   int
	perHostMax  int
	unlock      func()

	mu     sync.Mutex // serialises decisions and guards st, failed, pins
	st     *state
	priv   redact.Secret[ed25519.PrivateKey]
	id     Identity
	failed error
	pins   map[string]*tokenBucket // first-use budget per source

	connMu    sync.Mutex
	conns     map[*conn]struct{}
	unauth    list.List      // *conn not yet authenticated, oldest first
	nAuth     int            // authenticated connections, not evicted
	perHost   map[string]int // unauthenticated connections per remote IP
	refusing  int            // goroutines writing a BUSY refusal
	listeners map[net.Listener]struct{}
	closed    bool
	done      chan struct{}
	wg        sync.WaitGroup
}

// conn is one served connection.
type conn struct {
	c        net.Conn
	admin    bool
	local    bool   // a Unix socket or net.Pipe: first-use pins allowed
	host     string // remote IP of a TCP/TLS connection, else ""
	source   string // whose first-use budget this connection spends (pinSource)
	accepted time.Time
	evicted  atomic.Bool
	authed   atomic.Bool
	elem     *list.Element // in Server.unauth; guarded by connMu
}

// maxRefusing caps the goroutines that write BUSY to connections refused
// at accept; over it a refused connection is closed without a frame.
const maxRefusing = 32

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
	if cfg.MaxConns < 0 || cfg.ReservedConns < 0 || cfg.UnauthRefusals < 0 || cfg.MaxUnauthPerHost < 0 || cfg.FirstUsePinsPerMinute < 0 || cfg.LogBurst < 0 ||
		cfg.IdleTimeout < 0 || cfg.AuthTimeout < 0 || cfg.LogInterval < 0 || cfg.EstablishAfter < 0 || cfg.MaxCoordinators < 0 {
		return nil, fmt.Errorf("%w: negative limit", ErrConfig)
	}
	if cfg.MaxCoordinators > MaxCoordinators {
		return nil, fmt.Errorf("%w: MaxCoordinators above %d", ErrConfig, MaxCoordinators)
	}
	maxConns := cfg.MaxConns
	if maxConns == 0 {
		maxConns = 256
	}
	reserved := cfg.ReservedConns
	if reserved == 0 {
		reserved = maxConns / 4
	} else if reserved >= maxConns {
		return nil, fmt.Errorf("%w: ReservedConns must be below MaxConns", ErrConfig)
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
		cfg:         cfg,
		log:         cfg.Logger,
		now:         cfg.Now,
		lifetime:    uint64(life / time.Second),
		establish:   uint64((cmp.Or(cfg.EstablishAfter, DefaultEstablishAfter) + time.Second - 1) / time.Second),
		maxRecords:  cmp.Or(cfg.MaxCoordinators, MaxCoordinators),
		pinRate:     cmp.Or(cfg.FirstUsePinsPerMinute, 60),
		pins:        map[string]*tokenBucket{},
		idle:        cmp.Or(cfg.IdleTimeout, 2*time.Minute),
		authTimeout: cmp.Or(cfg.AuthTimeout, 10*time.Second),
		refusals:    cmp.Or(cfg.UnauthRefusals, 4),
		maxConns:    maxConns,
		maxUnauth:   maxConns - reserved,
		perHostMax:  cmp.Or(cfg.MaxUnauthPerHost, max(1, (maxConns-reserved)/8)),
		perHost:     map[string]int{},
		unlock:      unlock,
		st:          st,
		priv:        redact.New(st.privateKey()),
		id:          st.identity(),
		conns:       map[*conn]struct{}{},
		listeners:   map[net.Listener]struct{}{},
		done:        make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.rl = newLogLimiter(s.log, cmp.Or(cfg.LogBurst, 10), cmp.Or(cfg.LogInterval, time.Minute))
	return s, nil
}

// Identity returns the witness id, its public key (the pin clients
// check) and its key id.
func (s *Server) Identity() Identity { return s.id }

// Refusals returns how many times each refusal — and each reclamation of
// a record — happened since Open, by log message and code, whether its
// log line was written, suppressed by the rate limit or below the log
// level. These are the witness's counters: the daemon has no metrics
// endpoint, and every line the rate limiter writes carries the same
// running "total".
func (s *Server) Refusals() []RefusalCount { return s.rl.counts() }

// Serve accepts coordinator connections on l until ctx ends or Close is
// called; it then closes l and returns nil. Other accept errors are
// returned.
func (s *Server) Serve(ctx context.Context, l net.Listener) error { return s.serve(ctx, l, false) }

// ServeAdmin accepts operator connections on l (a Unix socket; each peer
// must run as this process's uid, checked with peer credentials). Only
// these connections may send REVOKE, ENROL and FORGET, and send STATUS
// unsigned.
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
			s.rl.log(slog.LevelWarn, "admin connection refused: peer is not the owner", NotAdmin)
			s.refuseConn(c, &ErrorFrame{Code: NotAdmin, Message: "peer is not the witness owner"})
			continue
		}
		s.ServeConn(ctx, c, admin)
	}
}

// ServeConn serves one connection in a new goroutine (tracked by Close)
// and returns at once. admin grants the operator requests and counts the
// connection as authenticated; pass false for anything but an
// authenticated owner connection. A local connection — not a *tls.Conn,
// and its LocalAddr network "unix" or "pipe" — may pin a coordinator on
// first use (Config.RequireEnrolment); any other may not unless
// Config.FirstUseAnyTransport is set.
//
// A connection over the unauthenticated share of Config.MaxConns evicts
// the oldest unauthenticated connection if that one is at least
// AuthTimeout/10 old (so a flood of reconnections cannot evict a
// newcomer before it has had time to authenticate); otherwise, and when
// every slot is authenticated, it is answered with ERROR BUSY and closed.
func (s *Server) ServeConn(ctx context.Context, c net.Conn, admin bool) {
	cn := &conn{c: c, admin: admin, local: isLocal(c) || s.cfg.FirstUseAnyTransport, accepted: time.Now()}
	if !admin {
		cn.host = remoteHost(c)
		if cn.local {
			cn.source = pinSource(c, cn.host)
		}
	}
	s.connMu.Lock()
	if s.closed {
		s.connMu.Unlock()
		c.Close()
		return
	}
	// A victim to evict: the host's own oldest when the host is at its
	// cap, else the oldest of all when the table or the share is full.
	var victim *list.Element
	switch {
	case cn.host != "" && s.perHost[cn.host] >= s.perHostMax:
		for e := s.unauth.Front(); e != nil; e = e.Next() {
			if e.Value.(*conn).host == cn.host {
				victim = e
				break
			}
		}
	case s.nAuth+s.unauth.Len() >= s.maxConns || (!admin && s.unauth.Len() >= s.maxUnauth):
		victim = s.unauth.Front()
	}
	if victim != nil || (cn.host != "" && s.perHost[cn.host] >= s.perHostMax) || s.nAuth+s.unauth.Len() >= s.maxConns {
		if victim == nil || time.Since(victim.Value.(*conn).accepted) < s.authTimeout/10 {
			s.connMu.Unlock()
			s.rl.log(slog.LevelWarn, "connection refused: no free connection slot", Busy)
			s.refuseConn(c, &ErrorFrame{Code: Busy, Message: "no free connection slot"})
			return
		}
		old := victim.Value.(*conn)
		s.dropUnauthLocked(old)
		old.evicted.Store(true)
		// Only the read side: a decision in flight on the evicted
		// connection still gets its reply.
		old.c.SetReadDeadline(time.Unix(1, 0))
		defer s.rl.log(slog.LevelWarn, "unauthenticated connection evicted for a newer one", Busy)
	}
	if admin {
		cn.authed.Store(true)
		s.nAuth++
	} else {
		cn.elem = s.unauth.PushBack(cn)
		if cn.host != "" {
			s.perHost[cn.host]++
		}
	}
	s.conns[cn] = struct{}{}
	s.wg.Add(1)
	s.connMu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.connMu.Lock()
			delete(s.conns, cn)
			if cn.elem != nil {
				s.dropUnauthLocked(cn)
			} else if cn.authed.Load() && !cn.evicted.Load() {
				s.nAuth--
			}
			s.connMu.Unlock()
			c.Close()
		}()
		stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
		s.handle(ctx, cn)
	}()
}

// dropUnauthLocked removes cn from the unauthenticated connections.
func (s *Server) dropUnauthLocked(cn *conn) {
	s.unauth.Remove(cn.elem)
	cn.elem = nil
	if cn.host != "" {
		if s.perHost[cn.host]--; s.perHost[cn.host] <= 0 {
			delete(s.perHost, cn.host)
		}
	}
}

// remoteHost is the remote IP of a TCP or TLS connection, else "".
func remoteHost(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	switch a.Network() {
	case "tcp", "tcp4", "tcp6":
	default:
		return ""
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// pinSource names whose first-use budget a connection spends: the peer's
// uid on a Unix socket ("uid:N"; "unix" when the kernel does not say),
// the remote IP of a TCP/TLS connection (host; an IPv6 address by its
// /64, which one party usually holds whole), and "local" for anything
// else (an in-process pipe).
func pinSource(c net.Conn, host string) string {
	if uc, ok := c.(*net.UnixConn); ok {
		if cred, err := peercred.Get(uc); err == nil {
			return "uid:" + strconv.FormatUint(uint64(cred.UID), 10)
		}
		return "unix"
	}
	if host != "" {
		if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
			return "ip:" + ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
		}
		return "ip:" + host
	}
	return "local"
}

// isLocal reports whether c is a local transport: a Unix socket or an
// in-process pipe, never TLS.
func isLocal(c net.Conn) bool {
	if _, ok := c.(*tls.Conn); ok {
		return false
	}
	switch c.LocalAddr().Network() {
	case "unix", "pipe":
		return true
	}
	return false
}

// refuseConn answers a connection the witness will not serve with one
// ERROR frame and closes it, in a tracked goroutine so that a peer that
// does not read (or a TLS handshake that stalls) never blocks accept.
func (s *Server) refuseConn(c net.Conn, f *ErrorFrame) {
	s.connMu.Lock()
	if s.closed || s.refusing >= maxRefusing {
		s.connMu.Unlock()
		c.Close()
		return
	}
	s.refusing++
	s.wg.Add(1)
	s.connMu.Unlock()
	go func() {
		defer s.wg.Done()
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		WriteFrame(c, f)
		c.Close()
		s.connMu.Lock()
		s.refusing--
		s.connMu.Unlock()
	}()
}

// promote counts cn as authenticated: it proved that it holds a pinned
// authority key. An evicted connection stays evicted.
func (s *Server) promote(cn *conn) {
	if cn.authed.Load() {
		return
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if cn.evicted.Load() || cn.elem == nil {
		return
	}
	s.dropUnauthLocked(cn)
	cn.authed.Store(true)
	s.nAuth++
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
	for cn := range s.conns {
		// Unblocks a connection waiting for its next request; one in the
		// middle of a decision finishes it and fails its next read.
		cn.c.SetReadDeadline(time.Unix(1, 0))
	}
	s.connMu.Unlock()
	s.wg.Wait()
	s.rl.close()
	s.unlock()
	return nil
}

func (s *Server) handle(ctx context.Context, cn *conn) {
	c := cn.c
	var nonce [32]byte
	defer clear(nonce[:])
	for nonce == ([32]byte{}) { // nonces are never all-zero (ADDENDUM B.3)
		rand.Read(nonce[:])
	}
	hello := &Hello{Protocol: ProtocolName, WitnessID: s.id.WitnessID, Nonce: redact.New(nonce)}
	copy(hello.WitnessPublicKey[:], s.id.PublicKey)
	authBy := cn.accepted.Add(s.authTimeout)
	// The HELLO write (and a TLS handshake under it) must finish within
	// the hard lifetime of an unauthenticated connection.
	wd := time.Now().Add(10 * time.Second)
	if !cn.admin && authBy.Before(wd) {
		wd = authBy
	}
	c.SetWriteDeadline(wd)
	if err := WriteFrame(c, hello); err != nil {
		return
	}
	budget := s.refusals
	var seq uint64
	for {
		dl := time.Now().Add(s.idle)
		if !cn.authed.Load() && authBy.Before(dl) {
			dl = authBy
		}
		c.SetReadDeadline(dl)
		select {
		case <-s.done: // Close or ctx ran; their deadline may have been overwritten above
			return
		case <-ctx.Done():
			return
		default:
		}
		if cn.evicted.Load() {
			s.replyWithin(c, &ErrorFrame{Code: Busy, Message: "evicted for a newer connection"}, time.Second)
			return
		}
		f, err := ReadFrame(c)
		if err != nil {
			var we *Error
			switch {
			case errors.As(err, &we):
				s.rl.log(slog.LevelInfo, "request refused", we.Code, "reason", we.Message)
				s.reply(c, &ErrorFrame{Code: we.Code, Message: we.Message})
			case cn.evicted.Load():
				s.replyWithin(c, &ErrorFrame{Code: Busy, Message: "evicted for a newer connection"}, time.Second)
			case isTimeout(err) && !cn.authed.Load() && !time.Now().Before(authBy):
				s.rl.log(slog.LevelInfo, "connection closed: not authenticated in time", Busy)
				s.replyWithin(c, &ErrorFrame{Code: Busy, Message: "not authenticated in time"}, time.Second)
			case !errors.Is(err, io.EOF) && !isTimeout(err):
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
			out, rerr = s.request(req, nonce, cn)
		}
		if rerr != nil {
			op := "?"
			if ok {
				op = req.Op.String()
			}
			s.rl.log(slog.LevelInfo, "request refused", rerr.Code, "op", op, "reason", rerr.Message)
			out = &ErrorFrame{Code: rerr.Code, Message: rerr.Message}
		}
		// An unauthenticated connection has a small budget of refusals
		// (and a hard lifetime, above): a peer never keeps a slot by
		// being refused.
		spent := false
		if rerr != nil && !cn.authed.Load() {
			budget--
			spent = budget <= 0
		}
		if err := s.reply(c, out); err != nil || (rerr != nil && (rerr.Code.fatal() || spent)) {
			return
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Server) reply(c net.Conn, f Frame) error { return s.replyWithin(c, f, 10*time.Second) }

// replyWithin writes f with a write deadline d from now.
func (s *Server) replyWithin(c net.Conn, f Frame, d time.Duration) error {
	c.SetWriteDeadline(time.Now().Add(d))
	return WriteFrame(c, f)
}

// request authenticates and runs one request.
func (s *Server) request(req *Request, nonce [32]byte, cn *conn) (Frame, *Error) {
	admin := cn.admin
	switch req.Op {
	case TypeRevoke, TypeEnrol, TypeForget:
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
		if edstrict.Check(pub, req.SigningImage(buf[:0], nonce), bytesOf64(req.Signature)) != nil {
			return nil, refuse(BadSignature, "signature does not verify for this connection")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return nil, refuse(Internal, "witness state write failed earlier; restart the witness")
	}
	now := uint64(max(s.now().Unix(), 0))
	if req.Signed() && !cn.authed.Load() {
		// Whatever the decision, a request signed by the pinned key (or
		// one that pinned it) proves the connection is that coordinator's.
		defer func() {
			if rec := s.st.Records[req.CoordinatorID]; rec != nil && pinned(rec, req) == nil {
				s.promote(cn)
			}
		}()
	}
	switch req.Op {
	case TypeActivate:
		return s.activate(req, now, cn)
	case TypeRenew:
		return s.renew(req, now)
	case TypeRelinquish:
		return s.relinquish(req, now)
	case TypeStatus:
		return s.status(req, now)
	case TypeRevoke:
		return s.revoke(req, now)
	case TypeEnrol:
		return s.enrol(req, now)
	case TypeForget:
		return s.forget(req)
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

// mayPinFirstUse decides whether an ACTIVATE on cn may pin a key on first
// use: never with RequireEnrolment, only on a local (Unix socket)
// connection unless FirstUseAnyTransport. The rate is takePin's.
func (s *Server) mayPinFirstUse(cn *conn) *Error {
	if s.cfg.RequireEnrolment || !cn.local {
		return refuse(UnknownCoordinator, "coordinator is not enrolled")
	}
	return nil
}

// takePin spends one first-use pin of source's budget, if it has one.
// Budgets that have refilled are forgotten when maxPinSources sources are
// tracked (a full bucket is a fresh one); if none has, a new source waits.
func (s *Server) takePin(source string) bool {
	now := time.Now()
	b := s.pins[source]
	if b == nil {
		if len(s.pins) >= maxPinSources {
			for k, o := range s.pins {
				if o.full(now) {
					delete(s.pins, k)
				}
			}
			if len(s.pins) >= maxPinSources {
				return false
			}
		}
		r := float64(s.pinRate)
		b = &tokenBucket{capacity: r, perSecond: r / 60, tokens: r}
		s.pins[source] = b
	}
	return b.take(now)
}

// victim returns the record to reclaim so that a new one fits, or nil:
// among the reclaimable records (record.reclaimable), the one whose
// lease ended longest ago (smallest LastActive, then smallest id).
func (s *Server) victim(now uint64) *record {
	var v *record
	for _, r := range s.st.Records {
		if !r.reclaimable(now) {
			continue
		}
		if v == nil || r.LastActive < v.LastActive || (r.LastActive == v.LastActive && bytes.Compare(r.ID[:], v.ID[:]) < 0) {
			v = r
		}
	}
	return v
}

// newRecord returns a record for id, which has none: it starts from its
// bucket's floor.
func (s *Server) newRecord(id coordwire.CoordinatorID) *record {
	f := s.st.floorOf(id)
	return &record{ID: id, LastEpoch: f.Epoch, Sequence: f.Sequence}
}

// room returns the record to reclaim so that one more fits (nil when the
// table has room); a full table with nothing to reclaim is TABLE_FULL.
func (s *Server) room(now uint64) (*record, *Error) {
	if len(s.st.Records) < s.maxRecords {
		return nil, nil
	}
	if v := s.victim(now); v != nil {
		return v, nil
	}
	return nil, refuse(TableFull, "too many coordinators, none reclaimable")
}

func (s *Server) activate(req *Request, now uint64, cn *conn) (Frame, *Error) {
	fp := sha256.Sum256(req.AuthorityPublicKey[:])
	rec := s.st.Records[req.CoordinatorID]
	var nr, reclaim *record
	firstUse := rec == nil || !rec.Pinned
	if firstUse {
		if err := s.mayPinFirstUse(cn); err != nil {
			return nil, err
		}
	} else if err := pinned(rec, req); err != nil {
		return nil, err
	}
	if rec == nil {
		nr = s.newRecord(req.CoordinatorID)
	} else {
		nr = rec.clone()
	}
	if firstUse {
		nr.Pinned, nr.Fingerprint, nr.FirstUse = true, fp, true
	}
	if l := nr.Lease; l != nil && now < l.ExpiresAt {
		return nil, refuse(LeaseHeld, "an unexpired lease exists")
	}
	e := uint64(req.AuthorityEpoch)
	if e <= nr.LastEpoch {
		return nil, refuse(EpochNotGreater, "proposed epoch is not greater than the witness's last epoch")
	}
	if nr.FirstUse && !nr.Established && e-nr.LastEpoch > MaxFirstUseEpochStep {
		return nil, refuse(EpochTooFar, "proposed epoch is too far above the witness's last epoch for a coordinator that is not established")
	}
	if nr.Sequence == math.MaxUint64 {
		return nil, refuse(SequenceExhausted, "activation sequence exhausted")
	}
	if rec == nil {
		var err *Error
		if reclaim, err = s.room(now); err != nil {
			return nil, err
		}
	}
	// The pin is spent last, so that a refused ACTIVATE costs none.
	if firstUse && !s.takePin(cn.source) {
		return nil, refuse(Busy, "first-use pin rate exceeded; retry later")
	}
	if nr.Lease != nil {
		nr.spend(sha256.Sum256(bytesOf(nr.Lease.Token)), false)
	}
	var token [32]byte
	if s.cfg.Rand == nil {
		rand.Read(token[:])
	} else if _, err := io.ReadFull(s.cfg.Rand, token[:]); err != nil {
		panic("witness: Config.Rand failed: " + err.Error())
	}
	nr.LastEpoch = e
	nr.Sequence++
	nr.Activated = true
	nr.Lease = &lease{
		Token:        redact.New(token),
		HolderSHA256: redact.New(req.HolderSecretSHA256),
		Incarnation:  req.IncarnationID,
		ActivatedAt:  now,
		IssuedAt:     now,
		ExpiresAt:    now + s.lifetime,
	}
	nr.LastActive = nr.Lease.ExpiresAt
	c, cerr := s.issue(nr)
	if cerr != nil {
		return nil, cerr
	}
	if err := s.commitState(func(ns *state) {
		if reclaim != nil {
			ns.drop(reclaim.ID)
		}
		ns.Records[nr.ID] = nr
	}); err != nil {
		return nil, err
	}
	s.logReclaim(reclaim)
	s.log.Info("activation granted", "coordinator", nr.ID.String(), "epoch", nr.LastEpoch,
		"activation_sequence", nr.Sequence, "expires_at", c.ExpiresAt)
	return &Granted{Certificate: c}, nil
}

// logReclaim logs (rate-limited, counted) that r was reclaimed.
func (s *Server) logReclaim(r *record) {
	if r != nil {
		s.rl.log(slog.LevelInfo, "table full: reclaimed the record of a coordinator that was not established", TableFull,
			"coordinator", r.ID.String(), "epoch", r.LastEpoch, "activation_sequence", r.Sequence)
	}
}

// renewalWindow returns the issued_at and expires_at of a renewal at now
// of the recorded lease (issuedAt, expiresAt) with lifetime L. It never
// shortens the recorded lease (a clock stepped back must not let a new
// activation in before an issued certificate expires) and never issues a
// certificate expiring before it, which every client refuses
// (cert.CheckRenewal): when now + L does not reach past the recorded
// expiry, the renewal is the recorded window again — the certificate that
// set that expiry, which the clients accepted, so its issued_at is not in
// their future (cert.CheckTime) whatever the witness clock says now. A
// recorded window longer than cert.MaxLifetime (a state written by an
// older build, which recorded issued_at = now) falls back to
// expiresAt − L.
func renewalWindow(issuedAt, expiresAt, now, lifetime uint64) (iss, exp uint64) {
	if now+lifetime > expiresAt {
		return now, now + lifetime
	}
	if issuedAt < expiresAt && expiresAt-issuedAt <= cert.MaxLifetime {
		return min(issuedAt, expiresAt-lifetime), expiresAt
	}
	return expiresAt - lifetime, expiresAt
}

// issue signs the certificate of nr's recorded lease window.
func (s *Server) issue(nr *record) (coordwire.ActivationCertificate, *Error) {
	c, err := cert.Issue(cert.Grant{
		WitnessID:          s.id.WitnessID,
		CoordinatorID:      nr.ID,
		ActivationSequence: coordwire.ActivationSequence(nr.Sequence),
		AuthorityEpoch:     coordwire.AuthorityEpoch(nr.LastEpoch),
		IncarnationID:      nr.Lease.Incarnation,
		FencingToken:       nr.Lease.Token.Reveal(),
	}, nr.Lease.IssuedAt, nr.Lease.ExpiresAt-nr.Lease.IssuedAt, s.priv.Reveal())
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
	if tokenHash != sha256.Sum256(bytesOf(l.Token)) {
		return refuse(TokenMismatch, "fencing token is not the lease's")
	}
	if uint64(req.AuthorityEpoch) != rec.LastEpoch || uint64(req.ActivationSequence) != rec.Sequence ||
		req.IncarnationID != l.Incarnation {
		return refuse(LeaseMismatch, "epoch, activation sequence or incarnation is not the lease's")
	}
	if sha256.Sum256(bytesOf(req.HolderSecret)) != l.HolderSHA256.Reveal() {
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
	nr.Lease.IssuedAt, nr.Lease.ExpiresAt = renewalWindow(rec.Lease.IssuedAt, rec.Lease.ExpiresAt, now, s.lifetime)
	nr.LastActive = max(nr.LastActive, nr.Lease.ExpiresAt)
	established := !nr.Established && now >= nr.Lease.ActivatedAt && now-nr.Lease.ActivatedAt >= s.establish
	if established {
		nr.Established = true
	}
	c, cerr := s.issue(nr)
	if cerr != nil {
		return nil, cerr
	}
	if err := s.commit(nr); err != nil {
		return nil, err
	}
	if established {
		s.log.Info("coordinator established: its record is never reclaimed", "coordinator", nr.ID.String(),
			"epoch", nr.LastEpoch, "activation_sequence", nr.Sequence)
	}
	s.log.Debug("lease renewed", "coordinator", nr.ID.String(), "epoch", nr.LastEpoch,
		"activation_sequence", nr.Sequence, "expires_at", c.ExpiresAt)
	return &Granted{Certificate: c}, nil
}

func (s *Server) relinquish(req *Request, now uint64) (Frame, *Error) {
	th := sha256.Sum256(bytesOf(req.FencingToken))
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
	nr.LastActive = min(nr.LastActive, now)
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
		// No record: the floor a new record of this coordinator starts
		// from, which its next epoch must exceed (§12).
		f := s.st.floorOf(req.CoordinatorID)
		return &Status{CoordinatorID: req.CoordinatorID, NoRecord: true, LastAuthorityEpoch: f.Epoch,
			ActivationSequence: f.Sequence, WitnessTime: now}, nil
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
		Reclaimable:          rec.FirstUse && !rec.Established,
	}
	if l := rec.Lease; l != nil {
		st.HasLease = true
		st.LeaseIncarnationID = l.Incarnation
		st.LeaseTokenSHA256 = sha256.Sum256(bytesOf(l.Token))
		st.LeaseIssuedAt = l.IssuedAt
		st.LeaseExpiresAt = l.ExpiresAt
	} else if n := len(rec.Spent); n > 0 {
		st.Revoked = rec.Spent[n-1].Revoked
	}
	return st, nil
}

func (s *Server) revoke(req *Request, now uint64) (Frame, *Error) {
	rec := s.st.Records[req.CoordinatorID]
	if rec == nil {
		return nil, refuse(UnknownCoordinator, "no record for this coordinator")
	}
	nr := rec.clone()
	if nr.Lease != nil {
		nr.spend(sha256.Sum256(bytesOf(nr.Lease.Token)), true)
		nr.Lease = nil
		nr.LastActive = min(nr.LastActive, now)
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

// enrol pins the operator's fingerprint. An enrolled record is never
// reclaimed (FirstUse cleared); a new one makes room by reclaiming like
// a first-use ACTIVATE.
func (s *Server) enrol(req *Request, now uint64) (Frame, *Error) {
	rec := s.st.Records[req.CoordinatorID]
	var nr, reclaim *record
	if rec == nil {
		var err *Error
		if reclaim, err = s.room(now); err != nil {
			return nil, err
		}
		nr = s.newRecord(req.CoordinatorID)
	} else {
		if l := rec.Lease; l != nil && now < l.ExpiresAt && rec.Fingerprint != req.AuthorityFingerprint {
			return nil, refuse(LeaseHeld, "revoke the live lease before replacing the authority key")
		}
		nr = rec.clone()
	}
	nr.Pinned, nr.Fingerprint, nr.FirstUse = true, req.AuthorityFingerprint, false
	if err := s.commitState(func(ns *state) {
		if reclaim != nil {
			ns.drop(reclaim.ID)
		}
		ns.Records[nr.ID] = nr
	}); err != nil {
		return nil, err
	}
	s.logReclaim(reclaim)
	s.log.Info("coordinator enrolled", "coordinator", nr.ID.String())
	return &AdminOK{CoordinatorID: nr.ID}, nil
}

// forget removes a record that never activated and holds no lease: an
// enrolment or pin nobody used. Its epoch and sequence (its bucket's
// floor when it was made) go to the floor like a reclaimed record's. A
// record that activated is kept: FORGET is for enrolment mistakes, and a
// coordinator that has run leaves the table only by reclamation.
func (s *Server) forget(req *Request) (Frame, *Error) {
	rec := s.st.Records[req.CoordinatorID]
	if rec == nil {
		return nil, refuse(UnknownCoordinator, "no record for this coordinator")
	}
	if rec.Activated || rec.Lease != nil {
		return nil, refuse(Activated, "the coordinator has activated; its record is kept")
	}
	if err := s.commitState(func(ns *state) { ns.drop(rec.ID) }); err != nil {
		return nil, err
	}
	s.log.Warn("coordinator record forgotten by operator", "coordinator", rec.ID.String())
	return &AdminOK{CoordinatorID: rec.ID}, nil
}

// commit makes nr durable (the whole state file, atomically) and only
// then installs it in memory. A failed write stops every later decision:
// the file may or may not hold the new state, so memory cannot be trusted
// to match it until a restart reloads it.
func (s *Server) commit(nr *record) *Error {
	return s.commitState(func(ns *state) { ns.Records[nr.ID] = nr })
}

// commitState makes the state edit makes (on a copy of the record and
// floor maps) durable, then installs it.
func (s *Server) commitState(edit func(*state)) *Error {
	ns := &state{WitnessID: s.st.WitnessID, Seed: s.st.Seed, Records: maps.Clone(s.st.Records), Floors: maps.Clone(s.st.Floors)}
	if ns.Floors == nil {
		ns.Floors = map[uint16]floor{}
	}
	edit(ns)
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
