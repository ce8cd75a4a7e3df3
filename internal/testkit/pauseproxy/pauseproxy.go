// Package pauseproxy forwards a Unix socket to another with the
// server-to-client direction pausable: while paused the proxy forwards
// nothing from the server and reads at most one more chunk of it, so the
// client behind it receives nothing and returns no credit, as a
// subscriber that stalled or lost its network. The client-to-server
// direction is never paused.
//
// It is benchmark and test support (the coordserver benchmarks and the
// bench/peers harness); no production code imports it.
package pauseproxy

import (
	"io"
	"net"
	"sync"
)

// Proxy is a listening pausable proxy made by New. Its methods are safe
// for concurrent use.
type Proxy struct {
	path   string
	ln     net.Listener
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	closed bool
	conns  map[net.Conn]struct{} // both ends of every live proxied connection
	wg     sync.WaitGroup
}

// New listens on the Unix socket path and forwards every connection
// accepted there to a new connection to the Unix socket target. A
// connection whose dial to target fails is closed and the proxy goes on
// accepting. The proxy starts unpaused.
func New(path, target string) (*Proxy, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	p := &Proxy{path: path, ln: ln, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("unix", target)
			if err != nil {
				cc.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				cc.Close()
				sc.Close()
				return
			}
			p.conns[cc], p.conns[sc] = struct{}{}, struct{}{}
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(sc, cc); sc.Close(); p.forget(sc) }()
			go func() { defer p.wg.Done(); p.copyGated(cc, sc); cc.Close(); p.forget(cc) }()
		}
	}()
	return p, nil
}

// Path is the Unix socket path the proxy listens on.
func (p *Proxy) Path() string { return p.path }

// Pause stops (on true) or resumes (on false) forwarding from the server
// to the client on every connection. No byte the server sends after
// Pause(true) returns reaches a client until Pause(false): a read from
// the server already under way completes, and its bytes are held until
// resumed (or dropped by Cut).
func (p *Proxy) Pause(on bool) {
	p.mu.Lock()
	p.paused = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Cut closes both ends of every proxied connection now: what the server
// sent and the proxy has not forwarded is lost (with Pause, the replies
// to everything sent while paused), as a network that drops a
// connection. New connections are accepted as before; one that the
// proxy is still setting up when Cut is called may survive it.
func (p *Proxy) Cut() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Close stops accepting, closes every proxied connection as Cut does, and
// waits for every forwarding goroutine.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// waitGate blocks while the proxy is paused and src is still proxied; it
// reports whether src is still proxied.
func (p *Proxy) waitGate(src net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if _, live := p.conns[src]; !live {
			return false
		}
		if !p.paused {
			return true
		}
		p.cond.Wait()
	}
}

func (p *Proxy) copyGated(dst, src net.Conn) {
	buf := make([]byte, 512<<10)
	for {
		if !p.waitGate(src) {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			// The gate again: a Pause that came while this read was
			// under way holds its bytes.
			if !p.waitGate(src) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
