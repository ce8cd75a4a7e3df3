package core

import (
	"encoding/binary"
	"fmt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Visible is the one visibility predicate of §6 and ADDENDUM A.4, used by
// every read surface (snapshot pages, live events, replay pages, direct
// lookup, operation-result payloads) and by precondition checks. It
// reports whether p may see a record of kind; originPrincipal is the
// principal_key_id of an OPERATION record (nil for other kinds, and for an
// OPERATION it means "no origin known", which only ADMIN may see):
//
//	OBJECTIVE, RUN, WORK_SESSION, ARTIFACT     WORK_READ
//	BINDING (and admitted source facts)        WORK_READ + negotiated TERMINAL_BINDINGS
//	ARTIFACT_MANIFEST, EVIDENCE                ARTIFACT_READ + negotiated ARTIFACT_MANIFESTS
//	SIGNAL                                     WORK_READ + negotiated SIGNALS
//	OPERATION                                  ADMIN, or the originating principal
//	                                           holding WORK_READ or WORK_COMMAND
//	ADMIN                                      ADMIN + negotiated ADMINISTRATION
//
// Scopes are independent (ADMIN implies no other scope). An undefined
// kind is never visible.
func Visible(p Principal, kind coordwire.ObjectKind, originPrincipal *[32]byte) bool {
	read := p.Scope.Has(coordwire.ScopeWorkRead)
	switch kind {
	case coordwire.ObjectKindObjective, coordwire.ObjectKindRun, coordwire.ObjectKindWorkSession, coordwire.ObjectKindArtifact:
		return read
	case coordwire.ObjectKindBinding:
		return read && p.Caps.Has(coordwire.CapTerminalBindings)
	case coordwire.ObjectKindArtifactManifest, coordwire.ObjectKindEvidence:
		return p.Scope.Has(coordwire.ScopeArtifactRead) && p.Caps.Has(coordwire.CapArtifactManifests)
	case coordwire.ObjectKindSignal:
		return read && p.Caps.Has(coordwire.CapSignals)
	case coordwire.ObjectKindOperation:
		if p.Scope.Has(coordwire.ScopeAdmin) {
			return true
		}
		return originPrincipal != nil && *originPrincipal == p.KeyID &&
			(read || p.Scope.Has(coordwire.ScopeWorkCommand))
	case coordwire.ObjectKindAdmin:
		return p.Scope.Has(coordwire.ScopeAdmin) && p.Caps.Has(coordwire.CapAdministration)
	}
	return false
}

// VisibleObject applies Visible to a stored record (a snapshot or cut
// record, or the object of Tx.Object), reading the originating principal
// of an OPERATION record from field 1 of its payload. A malformed
// OPERATION payload is an error (the store holds only server-made
// records); nothing is allocated.
func VisibleObject(p Principal, o coordstore.Object) (bool, error) {
	if o.Key.Kind != coordwire.ObjectKindOperation {
		return Visible(p, o.Key.Kind, nil), nil
	}
	origin, err := operationOrigin(o.Payload)
	if err != nil {
		return false, err
	}
	return Visible(p, o.Key.Kind, &origin), nil
}

// VisibleEvent applies Visible to an event: an event is visible exactly
// when its object is (§6: one predicate for snapshot, event and replay).
// For OPERATION_CHANGED the origin is read from the SnapshotRecord the
// event carries (§7); events about BINDING objects (BINDING_OPENED,
// BINDING_ENDED, SOURCE_FACT_ADMITTED, SOURCE_GAP) follow the BINDING row.
func VisibleEvent(p Principal, e coordstore.Event) (bool, error) {
	if e.Object.Kind != coordwire.ObjectKindOperation {
		return Visible(p, e.Object.Kind, nil), nil
	}
	// SnapshotRecord: ObjectRef 18 || revision 8 || schema 2 || u32 len || payload.
	const head = coordwire.SnapshotRecordHeaderSize
	b := e.Payload
	if len(b) < head || uint64(len(b)-head) != uint64(binary.BigEndian.Uint32(b[head-4:head])) {
		return false, fmt.Errorf("core: OPERATION event payload is not one SnapshotRecord: %w", coordstore.ErrCorrupt)
	}
	origin, err := operationOrigin(b[head:])
	if err != nil {
		return false, err
	}
	return Visible(p, e.Object.Kind, &origin), nil
}

// operationOrigin reads principal_key_id (field 1) of an OPERATION record
// payload.
func operationOrigin(payload []byte) ([32]byte, error) {
	d := coordwire.NewTLVReader(payload)
	for d.Next() {
		if d.FieldID() == 1 {
			v := d.Bytes32()
			if d.Err() == nil {
				return v, nil
			}
		}
	}
	return [32]byte{}, fmt.Errorf("core: OPERATION record without principal_key_id: %w", coordstore.ErrCorrupt)
}
