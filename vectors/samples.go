package vectors

import (
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/certvectors"
	"github.com/phuxcoord/coord/internal/testkit/workloadvectors"
)

// Fixed times of the vectors (Unix seconds, ADDENDUM C.1).
const (
	vectorNow     = 1767225600 // 2026-01-01T00:00:00Z
	vectorLeaseAt = vectorNow + coordwire.LeaseSecs
)

// vectorCertificate returns the activation certificate of the sample
// frames: the valid certificate of the certificate vectors with the
// incarnation of the workload vector handshake
// (workloadvectors.VectorChallenge), re-signed with certvectors.VectorWitnessKey, so
// that COORD_HELLO_OK, its certificate and the challenge agree.
func vectorCertificate() (coordwire.ActivationCertificate, error) {
	var c coordwire.ActivationCertificate
	for _, v := range certvectors.VectorCases() {
		if v.Valid {
			if err := c.Decode(v.Certificate); err != nil {
				return c, err
			}
			c.IncarnationID = workloadvectors.VectorChallenge(coordwire.BindingUDSPeer).ServerIncarnation
			cert.Sign(&c, certvectors.VectorWitnessKey())
			return c, nil
		}
	}
	return c, errNoValidCertificate
}

type vectorError string

func (e vectorError) Error() string { return string(e) }

const errNoValidCertificate = vectorError("certvectors.VectorCases has no valid case")

// world holds the fixed identities every sample frame shares.
type world struct {
	cert           coordwire.ActivationCertificate
	guard          coordwire.AuthorityGuard
	objective      coordwire.ObjectiveID
	run            coordwire.RunID
	session        coordwire.WorkSessionID
	binding        coordwire.BindingID
	pending        coordwire.PendingBindingID
	signal         coordwire.SignalID
	artifact       coordwire.ArtifactID
	operation      coordwire.OperationID
	snapshot       coordwire.SnapshotID
	replay         coordwire.ReplayID
	subscription   coordwire.SubscriptionID
	ownerAuthority [32]byte
	ownerInc       coordwire.IncarnationID
	clientNonce    [32]byte
}

func newWorld() (*world, error) {
	c, err := vectorCertificate()
	if err != nil {
		return nil, err
	}
	return &world{
		cert:           c,
		guard:          cert.Guard(&c),
		objective:      coordwire.ObjectiveID(ID("objective-1")),
		run:            coordwire.RunID(ID("run-1")),
		session:        coordwire.WorkSessionID(ID("work-session-1")),
		binding:        coordwire.BindingID(ID("pending-binding-1")), // the same bytes become the BindingId
		pending:        coordwire.PendingBindingID(ID("pending-binding-1")),
		signal:         coordwire.SignalID(ID("signal-1")),
		artifact:       coordwire.ArtifactID(ID("artifact-1")),
		operation:      coordwire.OperationID(ID("operation-1")),
		snapshot:       coordwire.SnapshotID(ID("snapshot-1")),
		replay:         coordwire.ReplayID(ID("replay-1")),
		subscription:   coordwire.SubscriptionID(ID("subscription-1")),
		ownerAuthority: Bytes32("owner-authority-fingerprint"),
		ownerInc:       coordwire.IncarnationID(ID("owner-incarnation")),
		clientNonce:    workloadvectors.VectorChallenge(coordwire.BindingUDSPeer).ClientNonce,
	}, nil
}

func (w *world) startRun() *coordwire.StartRun {
	return &coordwire.StartRun{
		ObjectiveID:               w.objective,
		RunID:                     w.run,
		WorkSessionID:             w.session,
		ExecutorSchema:            1,
		ExecutorDocument:          []byte(`{"argv":["make","test"],"cwd":"/src"}`),
		PendingBindingID:          w.pending,
		OwnerAuthorityFingerprint: w.ownerAuthority,
		OwnerIncarnation:          w.ownerInc,
		TerminalGroup:             []byte("group:vectors"),
	}
}

// commandPayloads returns one payload of every command kind, in kind order.
func (w *world) commandPayloads() []coordwire.CommandPayload {
	manifest := (&coordwire.ArtifactManifestDoc{
		WorkSessionID: w.session,
		MediaType:     "text/plain",
		Size:          12,
		ContentSHA256: Bytes32("artifact-content"),
	}).AppendTLV(nil)
	return []coordwire.CommandPayload{
		&coordwire.CreateObjective{ObjectiveID: w.objective, Schema: 1, Document: []byte(`{"title":"vectors"}`)},
		&coordwire.UpdateObjective{ObjectiveID: w.objective, Schema: 1, Document: []byte(`{"title":"vectors, revised"}`)},
		w.startRun(),
		&coordwire.CancelRun{RunID: w.run},
		&coordwire.PauseRun{RunID: w.run},
		&coordwire.ResumeRun{RunID: w.run},
		&coordwire.AckSignal{SignalID: w.signal, Note: "seen"},
		&coordwire.SuppressSignal{SignalID: w.signal},
		&coordwire.RegisterArtifactManifest{ArtifactID: w.artifact, Revision: 1, Schema: coordwire.ArtifactManifestSchema, Manifest: manifest},
		&coordwire.EndBinding{BindingID: w.binding, Reason: coordwire.EndCompleted},
		&coordwire.ChangeRetention{OperationResultSecs: coordwire.MinOperationResultRetentionSecs, EventBytes: 1 << 30, ArtifactBytes: 1 << 32},
	}
}

func (w *world) preconditions() []coordwire.Precondition {
	return []coordwire.Precondition{
		{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: w.objective}, ExpectedRevision: 1},
		{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: w.run}, ExpectedRevision: 0},
	}
}

func (w *world) command() *coordwire.CoordCommand {
	return &coordwire.CoordCommand{
		RequestID:     1,
		Guard:         w.guard,
		OperationID:   w.operation,
		Kind:          coordwire.CommandStartRun,
		Payload:       w.startRun().AppendTLV(nil),
		Preconditions: w.preconditions(),
	}
}

func (w *world) bindingRef() coordwire.TerminalBindingRef {
	return coordwire.TerminalBindingRef{
		BindingID:                 w.binding,
		WorkSessionID:             w.session,
		OwnerAuthorityFingerprint: w.ownerAuthority,
		OwnerIncarnation:          w.ownerInc,
		ResourceID:                []byte("resource:terminal:vectors"),
	}
}

// record builds a schema-1 SnapshotRecord for p.
func record(id [16]byte, rev coordwire.ObjectRevision, p coordwire.RecordPayload) coordwire.SnapshotRecord {
	return coordwire.SnapshotRecord{
		Object:        coordwire.ObjectRef{Kind: p.ObjectKind(), ID: id},
		Revision:      rev,
		SchemaVersion: coordwire.RecordSchemaVersion,
		Payload:       p.AppendTLV(nil),
	}
}

// records returns a whole-authority snapshot of the vector world: one
// record of several kinds, in canonical (ObjectKind, id) order.
func (w *world) records() []coordwire.SnapshotRecord {
	return []coordwire.SnapshotRecord{
		record(w.objective, 1, &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte(`{"title":"vectors"}`), State: coordwire.ObjectiveActive}),
		record(w.run, 2, &coordwire.RunRecord{ObjectiveID: w.objective, Attempt: 1, State: coordwire.RunRunning}),
		record(w.session, 2, &coordwire.WorkSessionRecord{RunID: w.run, State: coordwire.WorkSessionActive, ActiveBinding: w.binding}),
		record(w.binding, 1, &coordwire.BindingRecord{Binding: w.bindingRef(), State: coordwire.BindingActive}),
		record(w.signal, 1, &coordwire.SignalRecord{WorkSessionID: w.session, Kind: coordwire.SignalPolicy, State: coordwire.SignalOpen, Message: "needs review"}),
	}
}

// events returns replay events 41..41+n-1, each carrying the SnapshotRecord
// of the object it changed.
func (w *world) events() []coordwire.ReplayEvent {
	recs := w.records()
	kinds := []coordwire.EventKind{
		coordwire.EventObjectiveChanged, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
		coordwire.EventBindingOpened, coordwire.EventSignalRaised,
	}
	out := make([]coordwire.ReplayEvent, len(recs))
	for i, r := range recs {
		out[i] = coordwire.ReplayEvent{
			EventSequence:  coordwire.EventSequence(41 + i),
			EventID:        coordwire.EventID(ID("event-" + string(rune('a'+i)))),
			EventKind:      kinds[i],
			Object:         r.Object,
			ObjectRevision: r.Revision,
			Schema:         coordwire.RecordSchemaVersion,
			Payload:        r.Append(nil),
		}
	}
	return out
}

func (w *world) snapshotDigest(recs []coordwire.SnapshotRecord, base coordwire.EventCut) [32]byte {
	return digest.Snapshot(w.guard.CoordinatorID, w.guard.AuthorityEpoch, w.guard.ActivationSequence, base, recs)
}

func (w *world) replayDigest(after, cut coordwire.EventCut, evs []coordwire.ReplayEvent) [32]byte {
	return digest.Replay(w.guard.CoordinatorID, w.guard.AuthorityEpoch, w.guard.ActivationSequence, w.subscription, after, cut, evs)
}

// SampleFrames returns one valid sample of each of the 30 frame types, in
// ascending type order, exactly as the frame vectors encode them. Fuzz
// targets and benchmarks may use them as seeds.
func SampleFrames() ([]coordwire.Frame, error) {
	w, err := newWorld()
	if err != nil {
		return nil, err
	}
	return w.samples(), nil
}

func (w *world) samples() []coordwire.Frame {
	recs := w.records()
	evs := w.events()[:2]
	started := (&coordwire.StartedResult{RunID: w.run, WorkSessionID: w.session, BindingID: w.binding}).Append(nil)
	challenge := workloadvectors.VectorChallenge(coordwire.BindingUDSPeer)
	response := workloadvectors.VectorResponse(challenge)
	scope := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand

	frames := []coordwire.Frame{
		&coordwire.CoordHello{
			ProtocolMajor: coordwire.ProtocolMajor, ProtocolMinor: coordwire.ProtocolMinor, ProtocolPatch: coordwire.ProtocolPatch,
			ClientName:           "phux-vectors",
			OfferedCapabilities:  coordwire.KnownCapabilities,
			RequiredCapabilities: coordwire.CapEventReplay,
			Limits:               coordwire.ReferenceLimits(),
			WorkloadOffer:        coordwire.WorkloadOffer{ClientNonce: w.clientNonce},
		},
		response,
		w.command(),
		&coordwire.GetOperationResult{RequestID: 2, Guard: w.guard, OperationID: w.operation},
		&coordwire.OpenSnapshot{RequestID: 3, Guard: w.guard, ReserveSubscription: true},
		&coordwire.SnapshotNext{RequestID: 4, SnapshotID: w.snapshot, Cursor: []byte("cursor:snapshot:0")},
		&coordwire.SnapshotApplied{RequestID: 5, SnapshotID: w.snapshot, SubscriptionID: w.subscription, InitialCreditCount: 128, InitialCreditBytes: 1 << 20},
		&coordwire.Subscribe{RequestID: 6, Guard: w.guard, AfterEventSequence: 40, InitialCreditCount: 128, InitialCreditBytes: 1 << 20},
		&coordwire.Credit{SubscriptionID: w.subscription, AddCount: 64, AddBytes: 1 << 19},
		&coordwire.OpenReplay{RequestID: 7, Guard: w.guard, SubscriptionID: w.subscription, AfterEventSequence: 40},
		&coordwire.ReplayNext{RequestID: 8, ReplayID: w.replay, Cursor: []byte("cursor:replay:0")},
		&coordwire.ReplayApplied{RequestID: 9, ReplayID: w.replay, SubscriptionID: w.subscription, InitialCreditCount: 128, InitialCreditBytes: 1 << 20},
		&coordwire.CoordPing{Nonce: 0x0123456789abcdef},
		&coordwire.CoordHelloOK{
			ProtocolMajor: coordwire.ProtocolMajor, ProtocolMinor: coordwire.ProtocolMinor, ProtocolPatch: coordwire.ProtocolPatch,
			NegotiatedCapabilities: coordwire.KnownCapabilities,
			CoordinatorID:          w.cert.CoordinatorID,
			AuthorityEpoch:         w.cert.AuthorityEpoch,
			IncarnationID:          w.cert.IncarnationID,
			Limits:                 coordwire.ReferenceLimits(),
			WorkloadGrant: coordwire.WorkloadGrant{
				KeyID: response.KeyID, AuthorityFingerprint: edstrict.KeyID(challenge.AuthorityPublicKey[:]),
				ExpiresAt: response.RequestedExpiry, EffectiveScope: scope,
			},
			OperationResultRetentionSecs: coordwire.MinOperationResultRetentionSecs,
			ActivationCertificate:        w.cert,
		},
		&coordwire.Ack{RequestID: 5},
		&coordwire.CoordAuthorityRenewed{Certificate: w.cert},
		challenge,
		&coordwire.CoordCommandResult{RequestID: 1, Operation: coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: w.guard.AuthorityEpoch, AdmittedEventSequence: 41}},
		&coordwire.OperationResultFrame{RequestID: 2, Operation: coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 44, ResultKind: coordwire.ResultStarted, ResultPayload: started}},
		&coordwire.SnapshotBegin{RequestID: 3, SnapshotID: w.snapshot, Guard: w.guard, BaseEventSequence: 40, FirstCursor: []byte("cursor:snapshot:0"), SubscriptionID: w.subscription, LeaseExpiresAt: vectorLeaseAt},
		&coordwire.SnapshotPage{RequestID: 4, SnapshotID: w.snapshot, Cursor: []byte("cursor:snapshot:0"), PageIndex: 0, Records: recs},
		&coordwire.SnapshotEnd{RequestID: 4, SnapshotID: w.snapshot, PageCount: 1, RecordCount: uint64(len(recs)), CanonicalSHA256: w.snapshotDigest(recs, 40)},
		&coordwire.Subscribed{RequestID: 6, SubscriptionID: w.subscription, NextDeliverySequence: 1},
		&coordwire.ReplayBegin{RequestID: 7, ReplayID: w.replay, SubscriptionID: w.subscription, FirstEvent: 41, ReplayCut: 42, FirstCursor: []byte("cursor:replay:0"), LeaseExpiresAt: vectorLeaseAt},
		&coordwire.ReplayPage{RequestID: 8, ReplayID: w.replay, Cursor: []byte("cursor:replay:0"), PageIndex: 0, Events: evs},
		&coordwire.ReplayEnd{RequestID: 8, ReplayID: w.replay, PageCount: 1, EventCount: uint64(len(evs)), CanonicalSHA256: w.replayDigest(40, 42, evs)},
		&coordwire.CoordEvent{
			SubscriptionID: w.subscription, DeliverySequence: 1, EventSequence: 43, EventID: coordwire.EventID(ID("event-43")),
			EventKind: coordwire.EventRunChanged, Object: recs[1].Object, ObjectRevision: 3, Schema: coordwire.RecordSchemaVersion,
			Payload: (&coordwire.SnapshotRecord{Object: recs[1].Object, Revision: 3, SchemaVersion: 1,
				Payload: (&coordwire.RunRecord{ObjectiveID: w.objective, Attempt: 1, State: coordwire.RunPaused}).AppendTLV(nil)}).Append(nil),
		},
		&coordwire.Gap{SubscriptionID: w.subscription, LastContiguousDelivery: 5, LastContiguousEvent: 40, ObservedEvent: 44, Reason: coordwire.GapQueueOverflow},
		&coordwire.CoordError{RequestID: 2, Code: coordwire.RevisionConflict, Message: "precondition revision mismatch"},
		&coordwire.CoordPong{Nonce: 0x0123456789abcdef},
	}
	return frames
}
