package coordserver_test

import (
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// Connection quotas (A.3): the 17th connection of one principal is
// refused RESOURCE_EXHAUSTED after its proof, other principals are not
// disturbed, and a closed connection gives its slot back; over the
// server-wide connection bound the socket gets RESOURCE_EXHAUSTED too.
func TestRefusalConnectionQuotas(t *testing.T) {
	e := rfStart(t, rfOptions{})
	a := e.key(coordwire.ScopeWorkRead)
	b := e.key(coordwire.ScopeWorkRead)
	before := e.dump()
	var open []*rfConn
	for range 16 {
		open = append(open, e.connect(a, coordwire.ScopeWorkRead))
	}
	c := e.dial()
	if _, err := c.Start(e.clientConfig(a, coordwire.ScopeWorkRead)); err != nil {
		t.Fatal(err)
	}
	if err := c.SendHello(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadChallenge(rfWait); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Response()
	if err != nil {
		t.Fatal(err)
	}
	c.note(resp.WorkloadProof[:])
	c.send(resp)
	c.fatal(coordwire.ResourceExhausted)
	// Another principal is not disturbed, nor are the 16.
	e.connect(b, coordwire.ScopeWorkRead).alive()
	open[0].alive()
	// A closed connection gives its slot back.
	open[15].Close()
	deadline := time.Now().Add(rfWait)
	for {
		c := e.dial()
		_, err := c.Handshake(e.clientConfig(a, coordwire.ScopeWorkRead), rfWait)
		if err == nil {
			c.alive()
			break
		}
		if coordwire.CodeOf(err) != coordwire.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("after a close: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.unchanged(before)

	// Over the server-wide bound of authenticated connections the
	// handshake ends with a fatal RESOURCE_EXHAUSTED "quota.connections"
	// after the proof (docs/semantics.md "Connection quotas"); a
	// connection that has not authenticated holds no slot of that bound
	// ("Admission before authentication"), and the connections already
	// open are served.
	t.Run("server_wide", func(t *testing.T) {
		e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Quotas.Connections = 2 }})
		e.t = t
		k := e.key(coordwire.ScopeWorkRead)
		k2 := e.key(coordwire.ScopeWorkRead)
		first := e.connect(k, coordwire.ScopeWorkRead)
		e.dial() // not authenticated: it holds no authenticated slot
		e.dial()
		time.Sleep(50 * time.Millisecond)
		second := e.connect(k2, coordwire.ScopeWorkRead)
		c := e.dial()
		if _, err := c.Handshake(e.clientConfig(k2, coordwire.ScopeWorkRead), rfWait); coordwire.CodeOf(err) != coordwire.ResourceExhausted {
			t.Fatalf("third authenticated connection: %v", err)
		}
		if got := e.srv.Stats().QuotaRefusals["quota.connections"]; got != 1 {
			t.Fatalf("quota.connections refusals: %d", got)
		}
		first.t, second.t = t, t
		first.alive()
		second.alive()
	})
}

// Config.HandshakeTimeout "bounds the whole handshake, COORD_HELLO
// included": with 1 s, a client that sends nothing, and one that sends
// COORD_HELLO and then nothing, are both closed after about 1 s (the
// 5 s of B.2 is the response's own, longer bound).
func TestRefusalHandshakeTimeout(t *testing.T) {
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.HandshakeTimeout = time.Second }})
	closedWithin := func(t *testing.T, c *rfConn, start time.Time, max time.Duration) {
		t.Helper()
		for {
			f, err := c.Read(max + time.Second)
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
			if f.Type() == coordwire.TypeWorkloadChallenge {
				continue
			}
			t.Fatalf("got %v", f.Type())
		}
		if d := time.Since(start); d > max {
			t.Fatalf("closed after %v, want at most %v", d, max)
		}
	}
	t.Run("group", func(t *testing.T) {
		t.Run("silent", func(t *testing.T) {
			t.Parallel()
			c := e.dial()
			c.t = t
			closedWithin(t, c, time.Now(), 1800*time.Millisecond)
		})
		t.Run("hello_then_silent", func(t *testing.T) {
			t.Parallel()
			c := e.dial()
			c.t = t
			start := time.Now()
			c.send(rawframe.NewHello())
			closedWithin(t, c, start, 1800*time.Millisecond)
		})
		t.Run("pings_do_not_extend_it", func(t *testing.T) {
			t.Parallel()
			c := e.dial()
			c.t = t
			start := time.Now()
			for range 4 {
				if err := c.Send(&coordwire.CoordPing{Nonce: 1}); err != nil {
					break
				}
				_, _ = c.Read(300 * time.Millisecond)
			}
			closedWithin(t, c, start, 1800*time.Millisecond)
		})
	})
}

// The aggregate outstanding-request bound of one principal (A.3, here
// configured to 3) counts over all its connections: with three requests
// held at the store gate on two connections, a fourth on either is a
// request-scoped RESOURCE_EXHAUSTED, never stored; another principal is
// not affected; the held ones complete.
func TestRefusalOutstandingPerPrincipal(t *testing.T) {
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Quotas.OutstandingPerPrincipal = 3 }})
	rwc := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	k := e.key(rwc)
	o := e.key(rwc)
	c1, c2 := e.connect(k, rwc), e.connect(k, rwc)
	before := e.dump()
	e.gate.hold()
	var held []*coordwire.CoordCommand
	for _, c := range []*rfConn{c1, c1, c2} {
		cmd, _ := c.create()
		c.send(cmd)
		held = append(held, cmd)
	}
	e.gate.waitHeld(t, 3)
	over, _ := c2.create()
	c2.send(over)
	c2.scopedNoProbe(coordwire.ResourceExhausted, over.RequestID)
	// Another principal still has its own budget (its command waits at
	// the gate like the others).
	oc := e.connect(o, rwc)
	ocmd, _ := oc.create()
	oc.send(ocmd)
	e.gate.waitHeld(t, 4)
	e.gate.release()
	for i, cmd := range held {
		c := c1
		if i == 2 {
			c = c2
		}
		if r := c.result(cmd.RequestID); r.Tag != coordwire.OperationSucceeded {
			t.Fatalf("held command %d: %v", i, r.Tag)
		}
	}
	if r := oc.result(ocmd.RequestID); r.Tag != coordwire.OperationSucceeded {
		t.Fatalf("other principal: %v", r.Tag)
	}
	c2.alive()
	after := e.dump()
	if got := len(after.Operations) - len(before.Operations); got != 4 {
		t.Fatalf("%d operations stored, want 4", got)
	}
	for _, op := range after.Operations {
		if op.ID == over.OperationID {
			t.Fatal("the refused command was stored")
		}
	}
}
