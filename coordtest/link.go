package coordtest

import (
	"encoding/binary"
	"io"
	"net"
	"sync"

	"github.com/phuxcoord/coord/coordwire"
)

// link relays the clients' Unix-socket connections to the coordinator's
// socket and breaks them on purpose: it cuts every connection (a lost
// network) and withholds the clients' CREDIT frames (forwarding them, in
// order, when released). It runs in the test process, so the coordinator
// sees the client's own uid, gid and pid on its socket and the UDS_PEER
// binding of the real handshake still holds.
type link struct {
	l        net.Listener
	upstream string

	mu       sync.Mutex
	pairs    map[*pair]struct{}
	withhold bool
	accepted int
	closed   bool
	wg       sync.WaitGroup
}

// pair is one relayed connection.
type pair struct {
	down, up net.Conn
	wmu      sync.Mutex // serialises writes to up
	held     [][]byte   // withheld CREDIT frames
}

func newLink(path, upstream string) (*link, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	k := &link{l: l, upstream: upstream, pairs: map[*pair]struct{}{}}
	k.wg.Add(1)
	go k.accept()
	return k, nil
}

func (k *link) accept() {
	defer k.wg.Done()
	for {
		down, err := k.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("unix", k.upstream)
		if err != nil {
			down.Close()
			continue
		}
		p := &pair{down: down, up: up}
		k.mu.Lock()
		if k.closed {
			k.mu.Unlock()
			down.Close()
			up.Close()
			return
		}
		k.pairs[p] = struct{}{}
		k.accepted++
		k.wg.Add(2)
		k.mu.Unlock()
		go k.clientToServer(p)
		go func() {
			defer k.wg.Done()
			_, _ = io.Copy(down, up)
			k.drop(p)
		}()
	}
}

// clientToServer forwards whole frames (u32 length, type, body), holding
// CREDIT frames back while credit is withheld.
func (k *link) clientToServer(p *pair) {
	defer k.wg.Done()
	defer k.drop(p)
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(p.down, hdr[:4]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n == 0 || n > coordwire.HardMaxFrameBytes {
			// Not a frame this link can parse: let the server judge it.
			p.wmu.Lock()
			_, _ = p.up.Write(hdr[:4])
			p.wmu.Unlock()
			_, _ = io.Copy(p.up, p.down)
			return
		}
		frame := make([]byte, 4+int(n))
		copy(frame, hdr[:4])
		if _, err := io.ReadFull(p.down, frame[4:]); err != nil {
			return
		}
		k.mu.Lock()
		hold := k.withhold && coordwire.FrameType(frame[4]) == coordwire.TypeCredit
		if hold {
			p.held = append(p.held, frame)
		}
		k.mu.Unlock()
		if hold {
			continue
		}
		p.wmu.Lock()
		_, err := p.up.Write(frame)
		p.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

// setWithhold starts or stops withholding CREDIT; stopping forwards what
// was held.
func (k *link) setWithhold(on bool) {
	k.mu.Lock()
	k.withhold = on
	var flush []*pair
	if !on {
		for p := range k.pairs {
			if len(p.held) > 0 {
				flush = append(flush, p)
			}
		}
	}
	k.mu.Unlock()
	for _, p := range flush {
		k.mu.Lock()
		held := p.held
		p.held = nil
		k.mu.Unlock()
		p.wmu.Lock()
		for _, f := range held {
			if _, err := p.up.Write(f); err != nil {
				break
			}
		}
		p.wmu.Unlock()
	}
}

// cutAll closes every relayed connection at once, both sides.
func (k *link) cutAll() int {
	k.mu.Lock()
	ps := make([]*pair, 0, len(k.pairs))
	for p := range k.pairs {
		ps = append(ps, p)
	}
	k.mu.Unlock()
	for _, p := range ps {
		k.drop(p)
	}
	return len(ps)
}

func (k *link) drop(p *pair) {
	p.down.Close()
	p.up.Close()
	k.mu.Lock()
	delete(k.pairs, p)
	k.mu.Unlock()
}

func (k *link) connections() (open, accepted int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.pairs), k.accepted
}

// Close stops the link and waits for its goroutines.
func (k *link) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	err := k.l.Close()
	k.cutAll()
	k.wg.Wait()
	return err
}
