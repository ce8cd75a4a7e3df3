package execowner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/peercred"
)

// maxInFlight bounds the requests one connection has in progress; the
// reader waits for a slot (back-pressure), it never queues more.
const maxInFlight = 64

// factAckTimeout bounds the wait for a FACT_ACK; the fact is then retried.
const factAckTimeout = 30 * time.Second

// errNoCoordinator is the transient Sink error while no client is
// connected: the owner retries the fact.
var errNoCoordinator = errors.New("execowner: no coordinator connected")

// Server serves one Owner on a Unix socket (the separate-process form;
// cmd/execowner runs it). One client — the coordinator — is served at a
// time: a new connection supersedes the previous one (a restarted
// coordinator reconnects before the old socket is noticed dead), and the
// facts not yet acknowledged are retried on it.
type Server struct {
	o *Owner

	mu     sync.Mutex
	cur    *serverConn
	closed bool
	ln     net.Listener
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// NewServer opens an Owner with cfg whose Sink streams facts to the
// connected client (cfg.Sink must be nil).
func NewServer(cfg Config) (*Server, error) {
	if cfg.Sink != nil {
		return nil, errors.New("execowner: NewServer owns Config.Sink")
	}
	s := &Server{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	cfg.Sink = s.sink
	o, err := New(cfg)
	if err != nil {
		return nil, err
	}
	s.o = o
	return s, nil
}

// Owner is the served Owner.
func (s *Server) Owner() *Owner { return s.o }

// Listen listens on a Unix socket at path, with mode 0600, in a directory
// that is created 0700 if missing and must otherwise allow nobody but its
// owner (mode & 077 == 0). A stale socket nobody listens on is replaced.
// Its refusals are *fs.PathError values, so that a command can report
// the cause without the path.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, &fs.PathError{Op: "listen", Path: dir, Err: fmt.Errorf("execowner: socket directory mode %v, want 0700", st.Mode().Perm())}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, &fs.PathError{Op: "listen", Path: path, Err: errors.New("execowner: exists and is not a socket")}
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, &fs.PathError{Op: "listen", Path: path, Err: errors.New("execowner: the socket is in use")}
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve accepts connections on ln until Close; it returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	s.ln = ln
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if !samePeerUser(c) {
			s.o.log.Warn("execowner: refused a connection from another user (or without peer credentials)")
			c.Close()
			continue
		}
		sc := &serverConn{s: s, c: c, acks: make(map[uint64]chan byte), done: make(chan struct{})}
		// HELLO goes out before sc becomes the facts' destination, so that
		// no fact can precede it on the wire.
		if sc.write(frame(opHello, appendHello(s.o.Fingerprint(), s.o.Incarnation(), s.o.group))) != nil {
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		old := s.cur
		s.cur = sc
		s.wg.Add(1)
		s.mu.Unlock()
		if old != nil {
			old.close()
		}
		go sc.serve()
	}
}

// Close stops accepting, closes the connection, closes the Owner (killing
// its children) and waits for every goroutine.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ln, cur := s.ln, s.cur
	s.mu.Unlock()
	s.cancel()
	if ln != nil {
		ln.Close()
	}
	if cur != nil {
		cur.close()
	}
	err := s.o.Close()
	s.wg.Wait()
	return err
}

// sink is the Owner's FactSink: it hands f to the current connection and
// waits for its FACT_ACK.
func (s *Server) sink(ctx context.Context, f coordwire.TerminalSourceFact) error {
	s.mu.Lock()
	sc := s.cur
	s.mu.Unlock()
	if sc == nil {
		return errNoCoordinator
	}
	return sc.fact(ctx, &f)
}

type serverConn struct {
	s  *Server
	c  net.Conn
	wm sync.Mutex // serializes writes

	mu       sync.Mutex
	nextFact uint64
	acks     map[uint64]chan byte
	done     chan struct{}
	once     sync.Once
}

func (sc *serverConn) close() {
	sc.once.Do(func() {
		close(sc.done)
		sc.c.Close()
	})
}

func (sc *serverConn) write(b []byte) error {
	sc.wm.Lock()
	defer sc.wm.Unlock()
	_, err := sc.c.Write(b)
	if err != nil {
		sc.close()
	}
	return err
}

func (sc *serverConn) fact(ctx context.Context, f *coordwire.TerminalSourceFact) error {
	ch := make(chan byte, 1)
	sc.mu.Lock()
	sc.nextFact++
	n := sc.nextFact
	sc.acks[n] = ch
	sc.mu.Unlock()
	defer func() {
		sc.mu.Lock()
		delete(sc.acks, n)
		sc.mu.Unlock()
	}()
	if err := sc.write(frame(opFact, appendFact(n, f))); err != nil {
		return errNoCoordinator
	}
	t := time.NewTimer(factAckTimeout)
	defer t.Stop()
	select {
	case st := <-ch:
		switch st {
		case ackAdmitted:
			return nil
		case ackRefused:
			return ErrFactRefused
		case ackEnded:
			// The coordinator's own refusal, carried over the socket.
			return coordwire.NewError(coordwire.RevisionConflict, "source.binding_ended")
		}
		return errNoCoordinator
	case <-sc.done:
		return errNoCoordinator
	case <-t.C:
		return errNoCoordinator
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (sc *serverConn) serve() {
	s := sc.s
	defer s.wg.Done()
	defer func() {
		sc.close()
		s.mu.Lock()
		if s.cur == sc {
			s.cur = nil
		}
		s.mu.Unlock()
	}()
	o := s.o
	var inflight sync.WaitGroup
	defer inflight.Wait()
	slots := make(chan struct{}, maxInFlight)
	r := bufio.NewReader(sc.c)
	for {
		op, body, err := readFrame(r, MaxFrameBytes)
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				o.log.Warn("execowner: closing a connection", "err", err)
			}
			return
		}
		q, err := decodeRequest(op, body)
		if err != nil {
			o.log.Warn("execowner: closing a connection", "err", err)
			return
		}
		if q.op == opFactAck {
			sc.mu.Lock()
			ch := sc.acks[q.fact]
			delete(sc.acks, q.fact)
			sent := q.fact != 0 && q.fact <= sc.nextFact
			sc.mu.Unlock()
			if !sent {
				o.log.Warn("execowner: closing a connection", "err", "FACT_ACK for a fact never sent")
				return
			}
			if ch != nil { // nil: a late ack of a fact already given up on
				ch <- q.ack
			}
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-sc.done:
			return
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			defer func() { <-slots }()
			sc.write(frame(opResult, sc.answer(q)))
		}()
	}
}

// answer runs one request against the Owner, under the server's context
// (a client that stops waiting does not stop an effect once begun).
func (sc *serverConn) answer(q request) []byte {
	o, ctx := sc.s.o, sc.s.ctx
	var out coordserver.EffectOutcome
	var err error
	switch q.op {
	case opSpawn:
		out.Kind = coordwire.EffectSpawn
		out.Spawn, err = o.Spawn(ctx, q.spawn)
	case opKill:
		out.Kind = coordwire.EffectKill
		out.Effect, err = o.Kill(ctx, coordserver.KillRequest{Key: q.key, Binding: q.ref})
	case opSignal:
		out.Kind = coordwire.EffectProcessSignal
		out.Effect, err = o.ProcessSignal(ctx, coordserver.SignalRequest{Key: q.key, Binding: q.ref, Signal: q.signal})
	case opOutcome:
		out, err = o.Outcome(ctx, q.key)
	}
	switch {
	case err == nil:
		return appendResult(q.req, stOK, out, "")
	case errors.Is(err, coordserver.ErrEffectConflict):
		return appendResult(q.req, stConflict, out, "")
	case errors.Is(err, coordserver.ErrOutcomeUnprovable):
		return appendResult(q.req, stUnprovable, out, "")
	case errors.Is(err, coordserver.ErrEffectUnknown):
		return appendResult(q.req, stUnknown, out, "")
	}
	return appendResult(q.req, stError, out, errorReason(err))
}

// ownUID is the uid a peer must have (a variable for the tests).
var ownUID = func() *atomic.Uint32 { var u atomic.Uint32; u.Store(uint32(os.Getuid())); return &u }()

// samePeerUser reports whether the peer of c runs as this process's user
// (the kernel's peer credentials; unavailable ones fail closed). The 0700
// directory already keeps other users out; this is the second lock.
func samePeerUser(c net.Conn) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false
	}
	cred, err := peercred.Get(uc)
	return err == nil && cred.UID == ownUID.Load()
}
