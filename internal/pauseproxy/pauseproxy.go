// Package pauseproxy forwards a Unix socket to another with the
// server-to-client direction pausable: while paused the proxy reads
// nothing from the server, so the client behind it receives nothing and
// returns no credit, as a subscriber that stalled or lost its network.
// The client-to-server direction is never paused.
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
	p := &Proxy{path: path, ln: ln}
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
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(sc, cc); sc.Close() }()
			go func() { defer p.wg.Done(); p.copyGated(cc, sc); cc.Close() }()
		}
	}()
	return p, nil
}

// Path is the Unix socket path the proxy listens on.
func (p *Proxy) Path() string { return p.path }

// Pause stops (on true) or resumes (on false) forwarding from the server
// to the client on every connection. A read already under way when
// pausing completes and its bytes are forwarded; no read starts while
// paused.
func (p *Proxy) Pause(on bool) {
	p.mu.Lock()
	p.paused = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Close stops accepting, resumes forwarding, and waits for every
// forwarding goroutine; it returns once both ends of every proxied
// connection have closed, so close the clients (or the server) first.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Pause(false)
	p.wg.Wait()
}

func (p *Proxy) copyGated(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		p.mu.Lock()
		for p.paused {
			p.cond.Wait()
		}
		p.mu.Unlock()
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
