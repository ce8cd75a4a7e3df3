// Command naiveclient is a deliberately non-conforming coordinator
// client for phux-coordcheck's own tests: it follows the driver contract
// (docs/conformance.md, "Client mode") on raw frames but checks nothing a
// client must check — it trusts any activation certificate and any
// renewal, applies snapshots and replays without verifying them, ignores
// GAP, and after a lost reply submits the command again under a new
// OperationId. The runner's client mode must fail it on every such
// requirement; that is how the client tests are shown able to fail.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/keystore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for ctx.Err() == nil {
		session(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// session is one connection: handshake, a command under a fresh
// OperationId, a reserving snapshot applied blindly, then frames read
// and ignored until the connection ends.
func session(ctx context.Context) {
	key, err := keystore.LoadWorkloadKeyFile(os.Getenv("PHUX_COORDCHECK_KEY_FILE"))
	if err != nil {
		return
	}
	fp, err := keystore.ParseFingerprint(os.Getenv("PHUX_COORDCHECK_AUTHORITY_PIN"))
	if err != nil {
		return
	}
	c, err := rawframe.Dial(ctx, os.Getenv("PHUX_COORDCHECK_ADDRESS"), rawframe.Options{})
	if err != nil {
		return
	}
	defer c.Close()
	context.AfterFunc(ctx, func() { c.Close() })
	h := rawframe.NewHello()
	h.OfferedCapabilities = coordwire.CapEventReplay
	if err := c.Send(h); err != nil {
		return
	}
	ch, err := c.ReadChallenge(5 * time.Second)
	if err != nil || ch.AuthorityPublicKey == [32]byte{} {
		return
	}
	_ = fp // the pin is not even compared
	scope := rawframe.ScopeImage(coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand)
	if err := c.Send(rawframe.SignResponse(ch, key, scope, uint64(time.Now().Add(time.Hour).Unix()))); err != nil {
		return
	}
	if _, err := c.ReadHelloOK(5 * time.Second); err != nil { // decoded, never verified
		return
	}
	p := &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: []byte("naive")}
	cmd := &coordwire.CoordCommand{RequestID: c.NextRequestID(), Guard: c.Guard(), OperationID: coordwire.NewOperationID(),
		Kind: coordwire.CommandCreateObjective, Payload: p.AppendTLV(nil)}
	if c.Send(cmd) != nil {
		return
	}
	open := &coordwire.OpenSnapshot{RequestID: c.NextRequestID(), Guard: c.Guard(), ReserveSubscription: true}
	if c.Send(open) != nil {
		return
	}
	var snap coordwire.SnapshotID
	var sub coordwire.SubscriptionID
	for {
		// Decoded without the negotiated caps: nothing is checked.
		t, body, err := c.NextRaw(time.Hour)
		if err != nil {
			return
		}
		f, err := coordwire.DecodeFrame(t, body)
		if err != nil {
			continue
		}
		switch m := f.(type) {
		case *coordwire.SnapshotBegin:
			snap, sub = m.SnapshotID, m.SubscriptionID
			if m.FirstCursor != nil {
				_ = c.Send(&coordwire.SnapshotNext{RequestID: c.NextRequestID(), SnapshotID: snap, Cursor: m.FirstCursor})
			}
		case *coordwire.SnapshotPage:
			if m.NextCursor != nil {
				_ = c.Send(&coordwire.SnapshotNext{RequestID: c.NextRequestID(), SnapshotID: snap, Cursor: m.NextCursor})
			}
		case *coordwire.SnapshotEnd:
			_ = c.Send(&coordwire.SnapshotApplied{RequestID: c.NextRequestID(), SnapshotID: snap, SubscriptionID: sub,
				InitialCreditCount: 16, InitialCreditBytes: 1 << 20})
		}
	}
}
