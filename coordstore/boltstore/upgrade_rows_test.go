package boltstore_test

import (
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// schema2Epoch is the FinalizedAt base of the schema-2 fixture's rows.
const schema2Epoch = 1_700_000_000

// schema2Retention is the operation-result retention the fixture's meta
// advertises (45 days: above the 30-day floor, so that the value an
// upgraded row gets is told apart from the floor).
const schema2Retention = 45 * 86400

// schema2Rows are the rows of testdata/schema2.db.gz, written through the
// store's Tx by boltstore at schema 2 (commit 2f83aee, before operations
// carried RetentionSecs): every operation state (final, pending, finalized
// after pending, tombstoned), an object, events and a binding with a fact.
func schema2Rows() (coordstore.Meta, []coordstore.Object, []coordstore.Event, []coordstore.Operation, []coordstore.Binding, []coordstore.SourceFact) {
	meta := coordstore.Meta{
		CoordinatorID: coordwire.CoordinatorID{0xc0, 1}, AuthorityEpoch: 3, ActivationSequence: 4,
		FencingTokenSHA256: [32]byte{7},
		Retention:          coordstore.Retention{OperationResultSecs: schema2Retention, EventBytes: 1 << 20, ArtifactBytes: 7},
	}
	objKey := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte{0x0b, 1}}
	objs := []coordstore.Object{{Key: objKey, Revision: 1, Schema: 1, Payload: []byte("objective document")}}
	succeeded := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 2, ResultKind: coordwire.ResultNone, ResultPayload: []byte{}}
	pending := coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: 3, AdmittedEventSequence: 3}
	tomb := coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: [32]byte{0xd3}, FinalState: coordwire.OperationSucceeded}
	p := [32]byte{0xa1}
	ops := []coordstore.Operation{
		{ID: coordwire.OperationID{0x01}, Revision: 1, PrincipalKeyID: p, Digest: [32]byte{0xd1}, Result: succeeded.Append(nil),
			AdmittedAt: schema2Epoch, FinalizedAt: schema2Epoch},
		{ID: coordwire.OperationID{0x02}, Revision: 1, PrincipalKeyID: p, Digest: [32]byte{0xd2}, Result: pending.Append(nil),
			AdmittedAt: schema2Epoch + 10},
		{ID: coordwire.OperationID{0x03}, Revision: 2, PrincipalKeyID: p, Digest: [32]byte{0xd3}, Result: tomb.Append(nil), Tombstoned: true,
			AdmittedAt: schema2Epoch - 100, FinalizedAt: schema2Epoch - 100},
		{ID: coordwire.OperationID{0x04}, Revision: 2, PrincipalKeyID: [32]byte{0xa2}, Digest: [32]byte{0xd4}, Result: succeeded.Append(nil),
			AdmittedAt: schema2Epoch + 5, FinalizedAt: schema2Epoch + 20},
	}
	var evs []coordstore.Event
	for i, o := range ops[:3] {
		evs = append(evs, coordstore.Event{Sequence: uint64(i + 1), ID: coordwire.EventID{0xe0, byte(i + 1)}, Kind: coordwire.EventOperationChanged,
			Object: o.Key(), ObjectRevision: o.Revision, Schema: coordstore.RecordSchema, Payload: []byte{byte(i)}})
	}
	ref := coordwire.TerminalBindingRef{BindingID: coordwire.BindingID{0xb1}, WorkSessionID: coordwire.WorkSessionID{0x5e},
		OwnerAuthorityFingerprint: [32]byte{0x0f}, OwnerIncarnation: coordwire.IncarnationID{0x1c}, ResourceID: []byte("res")}
	binds := []coordstore.Binding{{ID: ref.BindingID, Revision: 1, Ref: ref, SourceSequence: 1}}
	facts := []coordstore.SourceFact{{Binding: ref.BindingID, Sequence: 1, Image: []byte("fact")}}
	return meta, objs, evs, ops, binds, facts
}
