package coordclient_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/workload"
)

// stepServer accepts one client on a real Unix socket, runs the real
// server handshake (workload.ServerHandshake) up to the client's step —
// after COORD_HELLO (the client awaits WORKLOAD_CHALLENGE) or after
// WORKLOAD_RESPONSE (it awaits COORD_HELLO_OK) — then sends wire, and
// returns what the client sends next: its COORD_ERROR, or nil when it
// closes without one.
func stepServer(t *testing.T, step coordwire.HandshakeStep, wire []byte) (addr string, reply <-chan *coordwire.CoordError) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "step.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan *coordwire.CoordError, 1)
	go func() {
		defer close(out)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		c := rawframe.Wrap(nc, coordwire.RoleServer)
		if _, err := c.Next(5 * time.Second); err != nil {
			t.Errorf("server: reading COORD_HELLO: %v", err)
			return
		}
		if step == coordwire.StepAwaitHelloOK {
			b, err := workload.UDSServerBinding(nc.(*net.UnixConn))
			if err != nil {
				t.Error(err)
				return
			}
			hs, err := workload.NewServerHandshake(workload.ServerConfig{AuthorityKey: authKey, Incarnation: coordwire.IncarnationID{1},
				Registry: registry, Binding: b, Capabilities: coordwire.KnownCapabilities})
			if err != nil {
				t.Error(err)
				return
			}
			_, body := c.LastBody()
			ch, err := hs.HandleHello(body, time.Now())
			if err != nil || c.Send(ch) != nil {
				t.Errorf("server: challenge: %v", err)
				return
			}
			if _, err := c.Next(5 * time.Second); err != nil {
				t.Errorf("server: reading WORKLOAD_RESPONSE: %v", err)
				return
			}
			typ, body := c.LastBody()
			if _, err := hs.HandleResponse(typ, body, time.Now()); err != nil {
				t.Errorf("server: response: %v", err)
				return
			}
		}
		if err := c.SendRaw(wire); err != nil {
			return
		}
		f, err := c.Next(5 * time.Second)
		if err != nil {
			return
		}
		if e, ok := f.(*coordwire.CoordError); ok {
			out <- e
		}
	}()
	return "unix:" + path, out
}

// TestHandshakeStepRefusals sends every frame type, and an unknown type
// byte, in each step of the client's handshake (§5): before the challenge
// only WORKLOAD_CHALLENGE (and COORD_PONG) is legal, before COORD_HELLO_OK
// only COORD_HELLO_OK. Every other type fails the Dial with PROTOCOL_ERROR
// and is answered with a COORD_ERROR PROTOCOL_ERROR (decided from the
// header: the bodies are zero frames); a COORD_ERROR from the server is
// its refusal, reported and not answered.
func TestHandshakeStepRefusals(t *testing.T) {
	if !canUDS() {
		t.Skip("needs Unix sockets with peer credentials")
	}
	wires := map[string][]byte{"unknown_0x02": rawframe.Header(1, 0x02)}
	for _, ft := range coordwire.FrameTypes() {
		wires[ft.String()] = coordwire.AppendFrame(nil, coordwire.NewFrame(ft))
	}
	wires["COORD_ERROR"] = coordwire.AppendFrame(nil, &coordwire.CoordError{Code: coordwire.ResourceExhausted, Message: "test"})
	legal := map[coordwire.HandshakeStep]map[string]bool{
		coordwire.StepAwaitChallenge: {"WORKLOAD_CHALLENGE": true, "COORD_PONG": true},
		coordwire.StepAwaitHelloOK:   {"COORD_HELLO_OK": true},
	}
	for step, ok := range legal {
		for name, wire := range wires {
			if ok[name] {
				continue
			}
			t.Run(step.String()+"/"+name, func(t *testing.T) {
				addr, reply := stepServer(t, step, wire)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				cfg := config()
				cfg.OfferedCapabilities = coordwire.KnownCapabilities
				c, err := coordclient.Dial(ctx, addr, cfg)
				if err == nil {
					c.Close()
					t.Fatal("Dial succeeded")
				}
				got := <-reply
				if name == "COORD_ERROR" {
					e := wantErr(t, err, coordwire.ResourceExhausted, nil)
					if !e.Remote || got != nil {
						t.Fatalf("the server's refusal: remote %v, answered with %v", e.Remote, got)
					}
					return
				}
				e := wantErr(t, err, coordwire.ProtocolError, nil)
				if e.Remote || e.Op != "handshake" {
					t.Fatalf("remote %v op %q", e.Remote, e.Op)
				}
				if got == nil || got.Code != coordwire.ProtocolError {
					t.Fatalf("the client answered %v, want COORD_ERROR PROTOCOL_ERROR", got)
				}
			})
		}
	}
}

// TestHandshakePongBeforeChallenge: a COORD_PONG before the challenge
// (the answer to a ping sent before COORD_HELLO) is legal and skipped.
func TestHandshakePongBeforeChallenge(t *testing.T) {
	if !canUDS() {
		t.Skip("needs Unix sockets")
	}
	addr, reply := stepServer(t, coordwire.StepAwaitChallenge, coordwire.AppendFrame(nil, &coordwire.CoordPong{Nonce: 3}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := coordclient.Dial(ctx, addr, config())
	// The server sends nothing after the pong: the client waits for its
	// challenge until the deadline, and never refuses the pong.
	if err == nil {
		t.Fatal("Dial succeeded")
	}
	if e := wantErr(t, err, 0, nil); e.Code != 0 {
		t.Fatalf("refused the pong: %v", err)
	}
	if got := <-reply; got != nil {
		t.Fatalf("the client answered the pong with %v", got)
	}
}
