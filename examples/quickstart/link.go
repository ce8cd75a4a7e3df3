package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// link relays Unix-socket connections from the client to the coordinator
// and can lose one reply on purpose: the quickstart uses it to show what
// the client does when a connection breaks after a command was sent. It is
// a fault injector for the demonstration only; a real client dials the
// coordinator's socket directly.
//
// The relay runs in the same process as the client, so the coordinator
// sees the client's own uid, gid and pid on the socket, and the UDS_PEER
// channel binding of the handshake still holds.
type link struct {
	l        net.Listener
	upstream string // the coordinator's socket path

	dropNext atomic.Bool  // lose the next bytes the coordinator sends, then cut
	dropped  atomic.Int64 // bytes lost so far
	accepted atomic.Int64 // connections the client opened

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newLink listens on path and relays every connection to upstream.
func newLink(path, upstream string) (*link, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	k := &link{l: l, upstream: upstream, conns: map[net.Conn]struct{}{}}
	k.wg.Add(1)
	go k.accept()
	return k, nil
}

// dropNextReply makes the link lose whatever the coordinator sends next
// and close both sides, as a broken network would.
func (k *link) dropNextReply() { k.dropNext.Store(true) }

// Close stops the link and waits for its goroutines.
func (k *link) Close() error {
	err := k.l.Close()
	k.mu.Lock()
	for c := range k.conns {
		c.Close()
	}
	k.conns = nil
	k.mu.Unlock()
	k.wg.Wait()
	return err
}

func (k *link) accept() {
	defer k.wg.Done()
	for {
		down, err := k.l.Accept()
		if err != nil {
			return // closed
		}
		k.accepted.Add(1)
		up, err := net.Dial("unix", k.upstream)
		if err != nil {
			down.Close()
			continue
		}
		if !k.track(down, up) {
			return
		}
		k.wg.Add(2)
		go func() { // client → coordinator
			defer k.wg.Done()
			io.Copy(up, down)
			k.untrack(down, up)
		}()
		go func() { // coordinator → client, unless a drop is armed
			defer k.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := up.Read(buf)
				if n > 0 && k.dropNext.CompareAndSwap(true, false) {
					k.dropped.Add(int64(n))
					break
				}
				if n > 0 {
					if _, werr := down.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			k.untrack(down, up)
		}()
	}
}

// track records a relayed pair so that Close can cut it; it reports false
// (and closes the pair) once the link is closing.
func (k *link) track(cs ...net.Conn) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		k.conns[c] = struct{}{}
	}
	return true
}

// untrack closes a relayed pair (both directions end together).
func (k *link) untrack(cs ...net.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(k.conns, c)
	}
}
