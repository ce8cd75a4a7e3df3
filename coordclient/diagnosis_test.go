package coordclient_test

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
)

// TestHandshakeSaysWhichSideRefused (§5, B.3): a wrong authority pin and
// an unregistered workload key are both AUTHENTICATION_FAILED with the
// generic reason, but the caller can tell them apart: the pin mismatch is
// the client's own check (ErrAuthorityMismatch, not Remote), the
// unregistered key the coordinator's refusal (Remote, without
// ErrAuthorityMismatch).
func TestHandshakeSaysWhichSideRefused(t *testing.T) {
	s := newServer(t)
	cfg := config()
	cfg.AuthorityFingerprint = edstrict.KeyID(otherKey.Public())
	_, err := coordclient.Dial(tctx(t), s.addr, cfg)
	e := wantErr(t, err, coordwire.AuthenticationFailed, coordclient.ErrAuthorityMismatch)
	if e.Remote || errors.Is(err, coordclient.ErrNotCoordinator) {
		t.Fatalf("wrong pin: %+v, want a local refusal", e)
	}

	cfg = config()
	cfg.WorkloadKey = rogueKey
	_, err = coordclient.Dial(tctx(t), s.addr, cfg)
	e = wantErr(t, err, coordwire.AuthenticationFailed, nil)
	if !e.Remote || errors.Is(err, coordclient.ErrAuthorityMismatch) || errors.Is(err, coordclient.ErrNotCoordinator) {
		t.Fatalf("unregistered key: %v (remote %v), want the coordinator's refusal only", err, e.Remote)
	}
}

// TestDialNotACoordinator: a peer whose first frame is one only a client
// sends (the witness greets every connection with its HELLO, type 0x01,
// COORD_HELLO's type) is refused PROTOCOL_ERROR and marked
// ErrNotCoordinator, as is a TLS server that selects no ALPN.
func TestDialNotACoordinator(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvTLS, cliTLS := selfSignedTLS(t)
	srvTLS.NextProtos = []string{coordwire.ALPN}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				tc := tls.Server(nc, srvTLS)
				if tc.Handshake() != nil {
					return
				}
				// A greeting the way the witness sends one: length 1+2,
				// type 0x01, a body the client never reads.
				_, _ = tc.Write([]byte{0, 0, 0, 3, 0x01, 0, 0})
				time.Sleep(time.Second)
			}()
		}
	}()
	cfg := config()
	cfg.TLS = cliTLS
	_, err = coordclient.Dial(tctx(t), "tls:"+ln.Addr().String(), cfg)
	if e := wantErr(t, err, coordwire.ProtocolError, coordclient.ErrNotCoordinator); e.Remote {
		t.Fatalf("%+v, want a local refusal", e)
	}

	srvTLS2, cliTLS2 := selfSignedTLS(t)
	srvTLS2.NextProtos = nil // a TLS service that selects no ALPN
	ln2, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS2)
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	go func() {
		for {
			nc, err := ln2.Accept()
			if err != nil {
				return
			}
			go func() { _ = nc.(*tls.Conn).Handshake(); time.Sleep(time.Second); nc.Close() }()
		}
	}()
	cfg.TLS = cliTLS2
	_, err = coordclient.Dial(tctx(t), "tls:"+ln2.Addr().String(), cfg)
	wantErr(t, err, coordwire.ProtocolError, coordclient.ErrNotCoordinator)
}
