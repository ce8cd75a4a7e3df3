package coordserver_test

import (
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// Envelope refusals (§3.1, §7, §13; docs/semantics.md "Envelope order of
// checks"): every one is fatal — COORD_ERROR with the exact code, then
// close — decided from the header before any payload byte is needed, and
// none writes anything durable.
func TestRefusalEnvelope(t *testing.T) {
	e := rfStart(t, rfOptions{})
	k := e.key(coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand)
	// Something durable exists, so that "unchanged" compares real state.
	seed := e.connect(k, coordwire.ScopeWorkCommand)
	cmd, _ := seed.create()
	seed.do(cmd)
	before := e.dump()

	// The active-state limits of these tests: a 64 KiB frame cap, so that
	// "over the selected cap" is below the hard cap.
	small := coordwire.Limits{MaxFrameBytes: 64 << 10, MaxPageBytes: 32 << 10, MaxPageRecords: 64,
		MaxTypedPayloadBytes: 32 << 10, MaxEventCreditCount: 16, MaxEventCreditBytes: 1 << 20}
	active := func() *rfConn {
		cfg := e.clientConfig(k, coordwire.ScopeWorkCommand)
		cfg.Limits = small
		c := e.connectWith(k, cfg)
		if c.Limits().MaxFrameBytes != small.MaxFrameBytes {
			t.Fatalf("selected frame cap %d", c.Limits().MaxFrameBytes)
		}
		return c
	}

	cases := []struct {
		name   string
		active bool // after COORD_HELLO_OK
		send   func(c *rfConn)
		code   coordwire.ErrorCode
	}{
		{"handshake/zero_length", false, func(c *rfConn) { c.sendRaw([]byte{0, 0, 0, 0}) }, coordwire.MalformedMessage},
		{"active/zero_length", true, func(c *rfConn) { c.sendRaw([]byte{0, 0, 0, 0}) }, coordwire.MalformedMessage},
		// Only the five header bytes are sent: the refusal cannot wait
		// for (or reserve) the promised payload.
		{"handshake/over_16KiB_hello", false, func(c *rfConn) {
			c.sendRaw(rawframe.Header(coordwire.HandshakeMaxFrameBytes+1, byte(coordwire.TypeCoordHello)))
		}, coordwire.FrameTooLarge},
		{"handshake/over_16KiB_response", false, func(c *rfConn) {
			// After the challenge, where WORKLOAD_RESPONSE is legal (before
			// COORD_HELLO it is a frame in the wrong step).
			c.send(rawframe.NewHello())
			if _, err := c.ReadChallenge(rfWait); err != nil {
				c.t.Fatal(err)
			}
			c.sendRaw(rawframe.Header(coordwire.HandshakeMaxFrameBytes+1, byte(coordwire.TypeWorkloadResponse)))
		}, coordwire.FrameTooLarge},
		{"handshake/over_hard_cap", false, func(c *rfConn) {
			c.sendRaw(rawframe.Header(coordwire.HardMaxFrameBytes+1, byte(coordwire.TypeCoordHello)))
		}, coordwire.FrameTooLarge},
		{"active/over_selected_cap", true, func(c *rfConn) {
			c.sendRaw(rawframe.Header(64<<10+1, byte(coordwire.TypeCoordCommand)))
		}, coordwire.FrameTooLarge},
		{"active/over_hard_cap", true, func(c *rfConn) {
			c.sendRaw(rawframe.Header(coordwire.HardMaxFrameBytes+1, byte(coordwire.TypeCoordCommand)))
		}, coordwire.FrameTooLarge},
		{"active/max_u32_length", true, func(c *rfConn) { c.sendRaw([]byte{0xff, 0xff, 0xff, 0xff, 0x10}) }, coordwire.FrameTooLarge},
		{"handshake/unknown_type", false, func(c *rfConn) { c.sendRaw(rawframe.Envelope(0x55, nil)) }, coordwire.ProtocolError},
		{"active/unknown_type", true, func(c *rfConn) { c.sendRaw(rawframe.Envelope(0x12, []byte{1, 4, 1, 1})) }, coordwire.ProtocolError},
		{"handshake/wrong_direction_hello_ok", false, func(c *rfConn) {
			c.sendRaw(rawframe.Envelope(byte(coordwire.TypeCoordHelloOK), nil))
		}, coordwire.ProtocolError},
		{"handshake/wrong_direction_challenge", false, func(c *rfConn) {
			c.sendRaw(rawframe.Envelope(byte(coordwire.TypeWorkloadChallenge), nil))
		}, coordwire.ProtocolError},
		{"active/wrong_direction_command_result", true, func(c *rfConn) {
			c.send(&coordwire.CoordCommandResult{RequestID: 1, Operation: coordwire.OperationResult{Tag: coordwire.OperationUnknown}})
		}, coordwire.ProtocolError},
		{"active/wrong_direction_event", true, func(c *rfConn) {
			c.sendRaw(rawframe.Envelope(byte(coordwire.TypeCoordEvent), nil))
		}, coordwire.ProtocolError},
		// Wrong state: request frames before COORD_HELLO_OK, and the
		// handshake frames after it.
		{"handshake/command_before_hello", false, func(c *rfConn) {
			cmd, _ := c.create()
			c.send(cmd)
		}, coordwire.ProtocolError},
		{"handshake/lookup_before_hello", false, func(c *rfConn) {
			c.send(&coordwire.GetOperationResult{RequestID: 1, Guard: e.srv.Guard(), OperationID: coordwire.NewOperationID()})
		}, coordwire.ProtocolError},
		{"handshake/response_before_hello", false, func(c *rfConn) {
			c.send(&coordwire.WorkloadResponse{RequestedScope: rfScope(coordwire.ScopeWorkRead), RequestedExpiry: 1})
		}, coordwire.ProtocolError},
		{"handshake/pong_before_hello", false, func(c *rfConn) { c.send(&coordwire.CoordPong{Nonce: 1}) }, coordwire.ProtocolError},
		{"handshake/credit_before_hello", false, func(c *rfConn) {
			c.send(&coordwire.Credit{SubscriptionID: coordwire.SubscriptionID(coordwire.NewOperationID()), AddCount: 1, AddBytes: 1})
		}, coordwire.ProtocolError},
		{"active/second_hello", true, func(c *rfConn) { c.send(rawframe.NewHello()) }, coordwire.ProtocolError},
		{"active/workload_response", true, func(c *rfConn) {
			c.send(&coordwire.WorkloadResponse{RequestedScope: rfScope(coordwire.ScopeWorkRead), RequestedExpiry: 1})
		}, coordwire.ProtocolError},
		// A body that does not decode under a correct envelope.
		{"handshake/truncated_hello_body", false, func(c *rfConn) {
			body := rawframe.NewHello().AppendBody(nil)
			c.sendRaw(rawframe.Envelope(byte(coordwire.TypeCoordHello), body[:len(body)-5]))
		}, coordwire.MalformedMessage},
		{"active/truncated_command_body", true, func(c *rfConn) {
			cmd, _ := c.create()
			body := cmd.AppendBody(nil)
			c.sendRaw(rawframe.Envelope(byte(coordwire.TypeCoordCommand), body[:len(body)-3]))
		}, coordwire.MalformedMessage},
		{"active/ping_without_nonce", true, func(c *rfConn) {
			c.sendRaw(rawframe.Envelope(byte(coordwire.TypeCoordPing), nil))
		}, coordwire.MalformedMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c *rfConn
			if tc.active {
				c = active()
			} else {
				c = e.dial()
			}
			c.t = t
			tc.send(c)
			c.fatal(tc.code)
			e.unchanged(before)
		})
	}

	// The caps are inclusive: a HELLO of exactly 16 KiB and a command of
	// exactly the selected 64 KiB (both padded with an unknown field,
	// which HELLO skips and COORD_COMMAND keeps as an extension) are
	// served; one byte more is the refusal tested above.
	t.Run("handshake/exactly_16KiB_hello", func(t *testing.T) {
		c := e.dial()
		c.t = t
		body := rfPad(rawframe.NewHello().AppendBody(nil), 20, coordwire.HandshakeMaxFrameBytes-1)
		c.sendRaw(rawframe.Envelope(byte(coordwire.TypeCoordHello), body))
		if _, err := c.ReadChallenge(rfWait); err != nil {
			t.Fatalf("a 16 KiB HELLO: %v", err)
		}
	})
	t.Run("active/exactly_selected_cap", func(t *testing.T) {
		c := active()
		cmd, _ := c.create()
		c.note(cmd.Payload)
		body := rfPad(cmd.AppendBody(nil), 7, 64<<10-1)
		c.sendRaw(rawframe.Envelope(byte(coordwire.TypeCoordCommand), body))
		if r := c.result(cmd.RequestID); r.Tag != coordwire.OperationSucceeded {
			t.Fatalf("a 64 KiB command: %v", r.Tag)
		}
		before = e.dump()
	})

	// A header promising more than is sent, then end of stream: the
	// server closes (it may or may not manage to say why first) and
	// stores nothing.
	t.Run("active/truncated_stream", func(t *testing.T) {
		c := active()
		cmd, _ := c.create()
		img := rawframe.Frame(cmd)
		c.sendRaw(img[:len(img)-4])
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		for {
			f, err := c.Read(rfWait)
			if rawframe.IsClosed(err) {
				break
			}
			if err != nil {
				t.Fatalf("want close: %v", err)
			}
			if ce, ok := f.(*coordwire.CoordError); ok {
				c.checkDiag(ce.Message)
				continue
			}
			t.Fatalf("got %v, want close", f.Type())
		}
		e.unchanged(before)
	})
}

// COORD_PING interleaving (§5, §7): before COORD_HELLO a PING gets a PONG
// with its nonce and the handshake still works; between the challenge and
// the response nothing interleaves, PING included (fatal; the workload
// profile answers it as its generic AUTHENTICATION_FAILED,
// docs/semantics.md); after COORD_HELLO_OK PING works both ways.
func TestRefusalPingInterleaving(t *testing.T) {
	e := rfStart(t, rfOptions{})
	k := e.key(coordwire.ScopeWorkRead)

	t.Run("before_hello", func(t *testing.T) {
		c := e.dial()
		c.t = t
		for _, n := range []uint64{0, 7, 1 << 63} {
			c.send(&coordwire.CoordPing{Nonce: n})
			p, err := rawframe.Expect[*coordwire.CoordPong](c.Conn, rfWait)
			if err != nil || p.Nonce != n {
				t.Fatalf("PONG for %d: %+v %v", n, p, err)
			}
		}
		if _, err := c.Handshake(e.clientConfig(k, coordwire.ScopeWorkRead), rfWait); err != nil {
			t.Fatalf("handshake after pings: %v", err)
		}
		c.alive()
	})
	t.Run("between_challenge_and_response", func(t *testing.T) {
		c := e.dial()
		c.t = t
		if _, err := c.Start(e.clientConfig(k, coordwire.ScopeWorkRead)); err != nil {
			t.Fatal(err)
		}
		if err := c.SendHello(); err != nil {
			t.Fatal(err)
		}
		ch, err := c.ReadChallenge(rfWait)
		if err != nil {
			t.Fatal(err)
		}
		c.note(ch.ServerNonce[:], ch.AuthorityProof[:])
		c.send(&coordwire.CoordPing{Nonce: 3})
		c.fatal(coordwire.ProtocolError) // a frame in the wrong handshake step
	})
	// Nor does any request frame: wrong state before COORD_HELLO_OK.
	t.Run("command_between_challenge_and_response", func(t *testing.T) {
		c := e.dial()
		c.t = t
		c.send(rawframe.NewHello())
		if _, err := c.ReadChallenge(rfWait); err != nil {
			t.Fatal(err)
		}
		cmd, _ := c.create()
		cmd.Guard = e.srv.Guard()
		c.send(cmd)
		c.fatal(coordwire.ProtocolError)
	})
	t.Run("after_hello_ok", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		c.t = t
		c.send(&coordwire.CoordPing{Nonce: 42})
		p, err := rawframe.Expect[*coordwire.CoordPong](c.Conn, rfWait)
		if err != nil || p.Nonce != 42 {
			t.Fatalf("PONG: %+v %v", p, err)
		}
		// An unsolicited PONG after HELLO_OK is legal and ignored.
		c.send(&coordwire.CoordPong{Nonce: 9})
		if err := c.ExpectSilence(200 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		c.alive()
	})
	// A ping between an admitted request and its reply does not disturb
	// the request.
	t.Run("interleaved_with_requests", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		c.t = t
		rid := c.NextRequestID()
		c.send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: coordwire.NewOperationID()})
		c.send(&coordwire.CoordPing{Nonce: 5})
		got := map[coordwire.FrameType]bool{}
		for range 2 {
			f, err := c.Read(rfWait)
			if err != nil {
				t.Fatal(err)
			}
			got[f.Type()] = true
		}
		if !got[coordwire.TypeCoordPong] || !got[coordwire.TypeOperationResult] {
			t.Fatalf("got %v", got)
		}
	})
}

func rfScope(s coordwire.Scope) []byte { return rawframe.ScopeImage(s) }

// rfPad appends an unknown BYTES field id to body so that the body is
// exactly n bytes long.
func rfPad(body []byte, id uint64, n int) []byte {
	for size := n - len(body) - 2; size > 0; size-- {
		hdr := coordwire.AppendFieldHeader(nil, id, size)
		if len(body)+len(hdr)+size == n {
			return append(append(body, hdr...), make([]byte, size)...)
		}
	}
	panic("rfPad: no padding fits")
}

// Every type byte a client may not send in a state is fatal
// PROTOCOL_ERROR, decided from the header (an empty body): all 256 values
// in the handshake (only COORD_HELLO and COORD_PING may start a
// connection, docs/semantics.md; a COORD_ERROR, the client's own refusal,
// is closed unanswered) and after COORD_HELLO_OK (where only the C→S
// request frames, COORD_PING, COORD_PONG and COORD_ERROR are legal).
func TestRefusalEveryTypeByte(t *testing.T) {
	e := rfStart(t, rfOptions{})
	k := e.key(coordwire.ScopeWorkRead)
	before := e.dump()
	for _, active := range []bool{false, true} {
		for b := 0; b < 256; b++ {
			ft := coordwire.FrameType(b)
			legal := ft == coordwire.TypeCoordHello || ft == coordwire.TypeCoordPing
			if active {
				legal = ft.LegalFrom(coordwire.RoleClient, coordwire.StateActive)
			}
			if legal {
				continue
			}
			var c *rfConn
			if active {
				c = e.connect(k, coordwire.ScopeWorkRead)
			} else {
				c = e.dial()
			}
			c.sendRaw(rawframe.Envelope(byte(b), nil))
			if ft == coordwire.TypeCoordError {
				if err := c.ExpectClosed(rfWait); err != nil {
					t.Errorf("active=%v: a client's COORD_ERROR: %v", active, err)
				}
				c.Close()
				continue
			}
			ce, err := c.ExpectFatal(coordwire.ProtocolError, rfWait)
			if ce != nil {
				c.checkDiag(ce.Message)
			}
			if err != nil {
				t.Errorf("active=%v type 0x%02x (%v): %v", active, b, ft, err)
			}
			c.Close()
		}
	}
	e.unchanged(before)
}
