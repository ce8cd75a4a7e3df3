package coordserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestSignalAndArtifactCommands drives ACK_SIGNAL, SUPPRESS_SIGNAL and
// REGISTER_ARTIFACT_MANIFEST over a real Unix socket against the real
// boltstore (the WorkSession and the Signal are seeded in the store, as
// START_RUN and the core's RaiseSignal would make them): success with its
// OBJECT_REF result and durable records, and the request-scoped
// refusals (capability not negotiated, scope missing, NOT_FOUND).
func TestSignalAndArtifactCommands(t *testing.T) {
	caps := coordwire.CapAdministration | coordwire.CapSignals | coordwire.CapArtifactManifests
	e := rfStart(t, rfOptions{caps: caps})
	ctx := context.Background()
	ws := coordwire.NewWorkSessionID()
	var sig coordwire.SignalID
	if err := e.store.Update(ctx, func(tx coordstore.Tx) error {
		rec := coordwire.WorkSessionRecord{RunID: coordwire.NewRunID(), State: coordwire.WorkSessionEnded}
		if err := tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindWorkSession, ID: ws}, Revision: 1, Schema: 1, Payload: rec.AppendTLV(nil)}); err != nil {
			return err
		}
		var err error
		sig, err = core.Exec{}.RaiseSignal(tx, time.Now(), ws, coordwire.SignalExecutionFailed, "spawn rejected")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	scope := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeSignalAck
	k := e.key(scope)
	cfg := e.clientConfig(k, scope)
	cfg.OfferedCapabilities = caps
	c := e.connectWith(k, cfg)

	// REGISTER_ARTIFACT_MANIFEST revision 1.
	art := coordwire.NewArtifactID()
	doc := coordwire.ArtifactManifestDoc{WorkSessionID: ws, MediaType: "text/plain", Size: 3, ContentSHA256: [32]byte{3}}
	r := c.do(c.command(coordwire.CommandRegisterArtifactManifest, &coordwire.RegisterArtifactManifest{ArtifactID: art, Revision: 1, Schema: 1, Manifest: doc.AppendTLV(nil)}))
	var ref coordwire.ObjectRef
	if r.ResultKind != coordwire.ResultObjectRef || ref.Decode(r.ResultPayload) != nil || ref != (coordwire.ObjectRef{Kind: coordwire.ObjectKindArtifact, ID: art}) {
		t.Fatalf("register result %+v", r)
	}
	// ACK then SUPPRESS the signal.
	r = c.do(c.command(coordwire.CommandAckSignal, &coordwire.AckSignal{SignalID: sig, Note: "seen"}))
	if ref.Decode(r.ResultPayload) != nil || ref != (coordwire.ObjectRef{Kind: coordwire.ObjectKindSignal, ID: sig}) {
		t.Fatalf("ack result %+v", r)
	}
	c.do(c.command(coordwire.CommandSuppressSignal, &coordwire.SuppressSignal{SignalID: sig}))
	if err := e.store.View(ctx, func(tx coordstore.ReadTx) error {
		o, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindSignal, ID: sig})
		if err != nil {
			return err
		}
		var s coordwire.SignalRecord
		if err := s.DecodeTLV(o.Payload); err != nil {
			return err
		}
		if s.State != coordwire.SignalSuppressed || o.Revision != 3 {
			t.Errorf("signal %v at revision %d", s.State, o.Revision)
		}
		m, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindArtifactManifest, ID: art})
		if err != nil || m.Revision != 1 {
			t.Errorf("manifest %v rev %d", err, m.Revision)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Request-scoped refusals, nothing durable changed (the key registered
	// first: its CREDENTIAL record is a registry change, not a refusal's).
	noAck := e.key(coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand)
	before := e.dump()
	cmd := c.command(coordwire.CommandAckSignal, &coordwire.AckSignal{SignalID: sig})
	c.send(cmd)
	c.scoped(coordwire.RevisionConflict, cmd.RequestID) // Suppressed → Acknowledged
	cmd = c.command(coordwire.CommandAckSignal, &coordwire.AckSignal{SignalID: coordwire.NewSignalID()})
	c.send(cmd)
	c.scoped(coordwire.NotFound, cmd.RequestID)
	cmd = c.command(coordwire.CommandRegisterArtifactManifest, &coordwire.RegisterArtifactManifest{ArtifactID: art, Revision: 3, Schema: 1, Manifest: doc.AppendTLV(nil)})
	c.send(cmd)
	c.scoped(coordwire.RevisionConflict, cmd.RequestID)
	other := doc
	other.WorkSessionID = coordwire.NewWorkSessionID()
	cmd = c.command(coordwire.CommandRegisterArtifactManifest, &coordwire.RegisterArtifactManifest{ArtifactID: coordwire.NewArtifactID(), Revision: 1, Schema: 1, Manifest: other.AppendTLV(nil)})
	c.send(cmd)
	c.scoped(coordwire.NotFound, cmd.RequestID)

	// Without the capabilities negotiated, and without SIGNAL_ACK.
	cfg.OfferedCapabilities = coordwire.CapAdministration
	plain := e.connectWith(k, cfg)
	plain.t = t
	cmd = plain.command(coordwire.CommandSuppressSignal, &coordwire.SuppressSignal{SignalID: sig})
	plain.send(cmd)
	plain.scoped(coordwire.CapabilityRequired, cmd.RequestID)
	cmd = plain.command(coordwire.CommandRegisterArtifactManifest, &coordwire.RegisterArtifactManifest{ArtifactID: art, Revision: 2, Schema: 1, Manifest: doc.AppendTLV(nil)})
	plain.send(cmd)
	plain.scoped(coordwire.CapabilityRequired, cmd.RequestID)
	cfg = e.clientConfig(noAck, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	cfg.OfferedCapabilities = caps
	n := e.connectWith(noAck, cfg)
	n.t = t
	cmd = n.command(coordwire.CommandAckSignal, &coordwire.AckSignal{SignalID: sig})
	n.send(cmd)
	n.scoped(coordwire.ScopeDenied, cmd.RequestID)
	e.unchanged(before)
}
