package coordserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// The same refusals over real TLS 1.3 (ALPN phux-coordinator/1,
// TLS_EXPORTER binding): a proof over another session's binding is
// AUTHENTICATION_FAILED,
// and the active-state rules (fatal stale guard, request-scoped scope
// refusal, envelope caps) are the same as on the Unix socket.
func TestRefusalTLS(t *testing.T) {
	e := rfStart(t, rfOptions{})
	rwc := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	writer := e.key(rwc)
	readOnly := e.key(coordwire.ScopeWorkRead)
	before := e.dump()

	// TLS 1.2 and a foreign ALPN are the server engineer's TestTLS.
	t.Run("wrong_binding", func(t *testing.T) {
		c := e.dialTLS()
		c.t = t
		c.send(rawframe.NewHello())
		ch, err := c.ReadChallenge(rfWait)
		if err != nil {
			t.Fatal(err)
		}
		if ch.ChannelBindingKind != coordwire.BindingTLSExporter {
			t.Fatalf("binding kind %v", ch.ChannelBindingKind)
		}
		c.note(ch.ServerNonce[:], ch.AuthorityProof[:])
		// The exporter of another session: a relay between two sessions.
		o, err := rawframe.Dial(context.Background(), e.tlsAddr, rawframe.Options{TLS: e.cliTLS})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		ob, err := o.Binding()
		if err != nil {
			t.Fatal(err)
		}
		relayed := *ch
		relayed.ChannelBinding, _ = ob.Derive(ch.ServerNonce)
		if relayed.ChannelBinding == ch.ChannelBinding {
			t.Fatal("two sessions share an exporter")
		}
		c.send(rawframe.SignResponse(&relayed, writer, rfScope(coordwire.ScopeWorkRead), uint64(time.Now().Add(time.Minute).Unix())))
		c.fatal(coordwire.AuthenticationFailed)
	})
	t.Run("active", func(t *testing.T) {
		c := e.handshakeOn(e.dialTLS(), writer, e.clientConfig(writer, rwc))
		c.t = t
		cmd, _ := c.create()
		cmd.Guard.FencingTokenSHA256[0] ^= 1
		c.send(cmd)
		c.fatal(coordwire.StaleAuthority)

		r := e.handshakeOn(e.dialTLS(), readOnly, e.clientConfig(readOnly, coordwire.ScopeWorkRead))
		r.t = t
		cmd, _ = r.create()
		r.send(cmd)
		r.scoped(coordwire.ScopeDenied, cmd.RequestID)
		r.sendRaw(rawframe.Header(coordwire.HardMaxFrameBytes+1, byte(coordwire.TypeCoordCommand)))
		r.fatal(coordwire.FrameTooLarge)
	})
	e.unchanged(before)
}
