package coordserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/lograte"
	"github.com/phuxcoord/coord/witness"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("coordserver: server closed")

// Server is one activated coordinator: it holds the witness lease and serves
// connections on the listeners given to Serve. Create it with New.
type Server struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	quotas Quotas
	limits core.Limits
	// admission is Config.Admission with its defaults; adm its book
	// (under mu); rl rate-limits the log lines of refusals per cause.
	admission Admission
	adm       admissionBook
	rl        *lograte.Limiter
	born      time.Time // the origin of mono

	store     coordstore.Store
	ownStore  bool
	wclient   *witness.Client
	ownClient bool
	lease     *witness.Lease

	coordID     coordwire.CoordinatorID
	epoch       coordwire.AuthorityEpoch
	activation  coordwire.ActivationSequence
	incarnation coordwire.IncarnationID
	guard       coordwire.AuthorityGuard
	retention   atomic.Uint64

	ctx    context.Context // ends at Close / the end of Shutdown
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	draining  bool // Shutdown started: no new connection or request
	closed    bool
	acct      quotaBook
	reqWG     sync.WaitGroup // in-flight requests (Add under mu)
	connWG    sync.WaitGroup // connection goroutines
	wg        sync.WaitGroup // server goroutines (watchers, sweeper, Serve)
	grantPoke chan struct{}  // a connection joined: recompute the next expiry

	commitMu  sync.Mutex
	commitGen chan struct{} // closed and replaced after every commit that wrote

	gaps [8]atomic.Uint64 // GAPs sent, by coordwire.GapReason

	execBase   core.Exec     // the core's injectable id sources (from Config.Rand); see exec
	owners     ownerBook     // registered terminal owners (owner.go)
	outboxWake chan struct{} // wakes the dispatcher (outbox.go)
	closeWait  closeWaits    // killed bindings awaiting their CLOSED (outbox.go)
	feed       eventFeed     // the subscriptions' shared feed of committed events (feed.go)

	stats statsBook // the counters of Stats

	credentialsGen   uint64 // the registry generation the activation's credential reconciliation read (admin.go)
	credentialsDirty bool   // and whether it failed

	stopOnce sync.Once
	fenceOne sync.Once
}

func newServer(cfg Config) *Server {
	s := &Server{cfg: cfg, store: cfg.Store, log: cfg.Logger, now: cfg.Now,
		listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
		grantPoke: make(chan struct{}, 1), commitGen: make(chan struct{}), outboxWake: make(chan struct{}, 1)}
	s.owners.init()
	s.closeWait.init()
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.Rand != nil {
		s.execBase.NewEventID = func() coordwire.EventID { return coordwire.EventID(s.newID16()) }
		s.execBase.NewID = s.newID16
	}
	s.quotas = cfg.Quotas.withDefaults()
	s.limits = core.Limits{MaxPendingPerPrincipal: s.quotas.PendingPerPrincipal, MaxPendingServer: s.quotas.Pending}
	s.acct.init()
	s.admission = cfg.Admission.withDefaults()
	s.born = time.Now()
	s.adm.init(s.admission)
	s.rl = lograte.New(s.log, s.admission.LogBurst, s.admission.LogInterval)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.cfg.CommandWait == 0 {
		s.cfg.CommandWait = 2 * time.Second
	}
	if s.cfg.EffectTimeout == 0 {
		s.cfg.EffectTimeout = time.Minute
	}
	if s.cfg.CloseGrace <= 0 {
		s.cfg.CloseGrace = DefaultCloseGrace
	}
	if s.cfg.HandshakeTimeout <= 0 {
		s.cfg.HandshakeTimeout = 10 * time.Second
	}
	if s.cfg.WriteTimeout <= 0 {
		s.cfg.WriteTimeout = 10 * time.Second
	}
	if s.cfg.SweepInterval == 0 {
		s.cfg.SweepInterval = time.Minute
	}
	if s.cfg.SweepBatch <= 0 {
		s.cfg.SweepBatch = 256
	}
	return s
}

func (s *Server) leaseConfig() witness.LeaseConfig {
	lc := s.cfg.Lease
	if lc.Logger == nil {
		lc.Logger = s.log
	}
	return lc
}

// start launches the server's own goroutines: the fence watcher, the live
// grant watcher, the credential-record watcher, the retention sweeper,
// the lease reaper, the effect dispatcher and the grace of killed
// bindings.
func (s *Server) start() {
	s.wg.Add(7)
	go s.dispatcher()
	go s.closeGraces()
	go s.watchFence()
	go s.watchGrants()
	go s.watchCredentials(s.credentialsGen, s.credentialsDirty)
	go s.sweeper()
	go s.reapLeases()
}

// CoordinatorID is the coordinator's lineage id; it survives restarts.
func (s *Server) CoordinatorID() coordwire.CoordinatorID { return s.coordID }

// Epoch is this activation's authority epoch.
func (s *Server) Epoch() coordwire.AuthorityEpoch { return s.epoch }

// ActivationSequence is the witness's activation sequence of this
// activation.
func (s *Server) ActivationSequence() coordwire.ActivationSequence { return s.activation }

// Incarnation is this process start's IncarnationId.
func (s *Server) Incarnation() coordwire.IncarnationID { return s.incarnation }

// Guard is the AuthorityGuard every state-rooting request must carry.
func (s *Server) Guard() coordwire.AuthorityGuard { return s.guard }

// Certificate returns the current activation certificate (fencing token
// included: it is what COORD_HELLO_OK carries).
func (s *Server) Certificate() coordwire.ActivationCertificate { return s.lease.Certificate() }

// Fenced returns a channel closed once the server has lost its authority
// (the lease fenced: witness lost, renewal refused, expiry, Shutdown).
func (s *Server) Fenced() <-chan struct{} { return s.lease.Fenced() }

// Store returns the store the server runs on, for reads (statistics,
// backups). The server publishes the events of its own commits to its
// subscriptions from memory; a write made to the store directly while
// the server runs (a test pruning the log, a repair tool) must be
// followed by StoreChanged, else live subscriptions may not see it.
func (s *Server) Store() coordstore.Store { return s.store }

// StoreChanged tells the server that its store was written directly,
// not through the server: the next delivery to any subscription re-reads
// the event log (new events, the oldest retained sequence) from the
// store, and every subscription and waiter wakes to look.
func (s *Server) StoreChanged() {
	s.feed.resync()
	s.notifyCommit()
}

func (s *Server) setRetention(secs uint64) {
	s.retention.Store(max(secs, coordwire.MinOperationResultRetentionSecs))
}

// Retention is the advertised operation_result_retention_secs.
func (s *Server) Retention() uint64 { return s.retention.Load() }

// Serve accepts connections on l until Shutdown or Close, serving each on
// its own goroutines. Unix-socket connections are authenticated with the
// UDS_PEER binding; TLS connections (from ListenTLS or a tls.Listener) must
// have negotiated TLS 1.3 and ALPN phux-coordinator/1 and use TLS_EXPORTER.
// Any other connection is closed. Serve closes l when it returns; it
// returns ErrServerClosed after Shutdown or Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed || s.draining {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			stopping := s.closed || s.draining
			s.mu.Unlock()
			if stopping {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.admitConn(nc)
	}
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.closing {
		s.adm.closing.Add(-1)
		c.closing = false
	}
	s.adm.releaseLocked(c)
	s.acct.releaseConn(c.principalKey, c.authed)
	s.mu.Unlock()
}

// forEachConn calls f for every live connection (outside the lock).
func (s *Server) forEachConn(f func(*conn)) {
	s.mu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		f(c)
	}
}

// beginRequest registers an in-flight request unless the server drains.
func (s *Server) beginRequest() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining || s.closed {
		return false
	}
	s.reqWG.Add(1)
	return true
}

// watchFence closes every connection with AUTHORITY_FENCED once the lease
// fences. (Each connection's writer also sees the fence through the lease
// generations; this covers connections still in their handshake.)
func (s *Server) watchFence() {
	defer s.wg.Done()
	select {
	case <-s.lease.Fenced():
	case <-s.ctx.Done():
		return
	}
	s.log.Warn("authority fenced: refusing every commit and closing every connection", "err", s.lease.Err())
	s.forEachConn(func(c *conn) { c.fatal(0, coordwire.AuthorityFenced, "authority.fenced") })
}

// fence ends the authority after a store refusal that must fence the writer
// (coordstore.ErrSequenceOverflow, §4).
func (s *Server) fence(reason error) {
	s.fenceOne.Do(func() {
		s.log.Error("fencing the coordinator", "err", reason)
		go s.lease.Close()
	})
}

// notifyCommit wakes the waiters for operations' final states.
func (s *Server) notifyCommit() {
	s.commitMu.Lock()
	close(s.commitGen)
	s.commitGen = make(chan struct{})
	s.commitMu.Unlock()
}

func (s *Server) commitChanged() <-chan struct{} {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	return s.commitGen
}

// Shutdown stops accepting connections and requests, lets the requests in
// flight finish (until ctx ends), closes every connection with COORD_ERROR
// AUTHORITY_FENCED ("server.shutdown"), relinquishes the witness lease so
// that the next activation may proceed at once, and waits for every
// goroutine of the server. It returns ctx's error if ctx ended first (the
// remaining work is then cut short as by Close).
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() { err = s.stop(ctx, true) })
	return err
}

// Close stops at once: listeners and connections are closed (with
// COORD_ERROR AUTHORITY_FENCED where possible), requests in flight are not
// waited for beyond their store transaction, and the lease is closed
// without relinquishing (the witness admits the next activation after the
// certificate expires). It waits for every goroutine of the server.
func (s *Server) Close() error {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s.stop(ctx, false)
	})
	return nil
}

func (s *Server) stop(ctx context.Context, graceful bool) error {
	s.mu.Lock()
	s.draining = true
	for l := range s.listeners {
		l.Close()
	}
	s.adm.notifyLocked() // a newcomer waiting for a slot is closed
	s.mu.Unlock()

	var err error
	if graceful {
		done := make(chan struct{})
		go func() { s.reqWG.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if graceful && err == nil {
		// The replies of the finished requests leave before the closing
		// error: the control lane would otherwise overtake them.
		err = s.waitRepliesWritten(ctx)
	}
	s.forEachConn(func(c *conn) { c.fatal(0, coordwire.AuthorityFenced, "server.shutdown") })
	if graceful && err == nil {
		cdone := make(chan struct{})
		go func() { s.connWG.Wait(); close(cdone) }()
		select {
		case <-cdone:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.forEachConn(func(c *conn) { c.nc.Close() })
	s.connWG.Wait()
	s.reqWG.Wait()
	if graceful && err == nil {
		if rerr := s.lease.Relinquish(ctx); rerr != nil {
			err = rerr
		}
	}
	s.lease.Close()
	s.wg.Wait()
	s.rl.Close()
	if s.ownClient {
		s.wclient.Close()
	}
	if s.ownStore {
		s.store.Close()
	}
	return err
}

// waitRepliesWritten waits until no live connection has a request whose
// reply is still queued.
func (s *Server) waitRepliesWritten(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		busy := false
		s.forEachConn(func(c *conn) { busy = busy || !c.idle() })
		if !busy {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

var _ io.Closer = (*Server)(nil)
