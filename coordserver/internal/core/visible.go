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
	rec, ok := eventRecordPayload(e.Payload)
	if !ok {
		return false, fmt.Errorf("core: OPERATION event payload is not one SnapshotRecord: %w", coordstore.ErrCorrupt)
	}
	origin, err := operationOrigin(rec)
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

// ResultView is the part of a principal that FilterResult reads: bit k
// is set when Visible(p, k, nil) holds for ObjectKind k. Principals with
// the same view see every operation result identically, so a server may
// build a result's filtered form once per view and share it (the live
// feed does).
type ResultView uint16

// ResultViewOf returns the ResultView of p.
func ResultViewOf(p Principal) ResultView {
	var v ResultView
	for k := coordwire.ObjectKindObjective; k <= coordwire.ObjectKindArtifactManifest; k++ {
		if Visible(p, k, nil) {
			v |= 1 << k
		}
	}
	return v
}

func (v ResultView) sees(k coordwire.ObjectKind) bool { return k < 16 && v&(1<<k) != 0 }

// FilterResult returns res as p may see it: the one rule that applies the
// §6 predicate (Visible) to operation-result payloads, used by every
// surface that carries a result — COORD_COMMAND_RESULT,
// OPERATION_RESULT, and the OPERATION records of snapshot pages, live
// OPERATION_CHANGED events and replay pages (docs/semantics.md). A
// result reference the reader may not see is omitted:
//
//   - SUCCEEDED STARTED whose run or work session p may not see, and
//     SUCCEEDED OBJECT_REF(kind, id) with !Visible(p, kind), become
//     SUCCEEDED NONE with an empty payload;
//   - SUCCEEDED STARTED whose binding p may not see loses its optional
//     binding_id (absent);
//   - everything else — NONE, DOCUMENT, and every other tag, which carry
//     no record reference — is returned as it is.
//
// The tag and completed_event_sequence never change, and neither does
// the stored result (filtering is on output only). res is not modified:
// the returned result shares res's payload when nothing is omitted and
// has a fresh one otherwise. A SUCCEEDED payload that is not a valid
// image of its kind (never stored: results are decoded strictly) is
// omitted too. FilterResult depends on p only through ResultViewOf(p).
func FilterResult(p Principal, res coordwire.OperationResult) coordwire.OperationResult {
	f, _ := ResultViewOf(p).filter(res)
	return f
}

// filter is FilterResult for the principals of view v; changed reports
// whether anything was omitted.
func (v ResultView) filter(res coordwire.OperationResult) (out coordwire.OperationResult, changed bool) {
	if res.Tag != coordwire.OperationSucceeded {
		return res, false
	}
	none := res
	none.ResultKind, none.ResultPayload = coordwire.ResultNone, []byte{}
	switch res.ResultKind {
	case coordwire.ResultObjectRef:
		var r coordwire.ObjectRefResult
		if r.Decode(res.ResultPayload) != nil || !v.sees(r.Object.Kind) {
			return none, true
		}
	case coordwire.ResultStarted:
		var r coordwire.StartedResult
		switch {
		case r.Decode(res.ResultPayload) != nil,
			!v.sees(coordwire.ObjectKindRun) || !v.sees(coordwire.ObjectKindWorkSession):
			return none, true
		case !r.BindingID.IsZero() && !v.sees(coordwire.ObjectKindBinding):
			r.BindingID = coordwire.BindingID{}
			res.ResultPayload = r.Append(nil)
			return res, true
		}
	}
	return res, false
}

// resultNeeds reads, from a canonical OperationResult image without
// decoding it, the view a reader needs to see the result whole: the
// kinds its references name (OBJECT_REF's kind; STARTED's run, work
// session and, when present, binding), zero for a result with no
// reference. An image whose reference cannot be read needs every kind,
// so that only FilterResult's decoding decides about it.
func resultNeeds(img []byte) ResultView {
	// tag u8 || completed_event_sequence u64 || result_kind u16 ||
	// u32 payload_len || payload
	const head = 1 + 8 + 2 + 4
	if len(img) < 1 || coordwire.OperationTag(img[0]) != coordwire.OperationSucceeded {
		return 0
	}
	if len(img) < head {
		return ^ResultView(0)
	}
	payload := img[head:]
	switch coordwire.ResultKind(binary.BigEndian.Uint16(img[9:11])) {
	case coordwire.ResultObjectRef:
		if len(payload) != coordwire.ObjectRefSize {
			return ^ResultView(0)
		}
		k := coordwire.ObjectKind(binary.BigEndian.Uint16(payload))
		if k >= 16 {
			return ^ResultView(0)
		}
		return 1 << k
	case coordwire.ResultStarted:
		need := ResultView(1<<coordwire.ObjectKindRun | 1<<coordwire.ObjectKindWorkSession)
		switch {
		// run_id 16 || work_session_id 16 || presence u8 || binding_id 16
		case len(payload) == 33 && payload[32] == 0:
			return need
		case len(payload) == 33+16 && payload[32] == 1:
			return need | 1<<coordwire.ObjectKindBinding
		}
		return ^ResultView(0)
	}
	return 0
}

// covers reports whether a reader of view v sees every kind of need.
func (v ResultView) covers(need ResultView) bool { return v&need == need }

// FilterOperationPayload returns an OPERATION record payload (A.7:
// 1 principal_key_id · 2 result) as p may see it: the result (field 2)
// through FilterResult, every other field verbatim. It returns payload
// itself, and changed false, when nothing is omitted; otherwise a fresh
// canonical payload. A malformed payload is an error (the store holds
// only server-made records). A result p sees whole is not decoded and
// nothing is allocated for it.
func FilterOperationPayload(p Principal, payload []byte) (out []byte, changed bool, err error) {
	img, err := operationResultImage(payload)
	if err != nil {
		return nil, false, err
	}
	v := ResultViewOf(p)
	if v.covers(resultNeeds(img)) {
		return payload, false, nil
	}
	var res coordwire.OperationResult
	if err := res.Decode(img); err != nil {
		return nil, false, fmt.Errorf("core: OPERATION record result does not decode: %w", coordstore.ErrCorrupt)
	}
	f, changed := v.filter(res)
	if !changed {
		return payload, false, nil
	}
	out = make([]byte, 0, len(payload))
	d := coordwire.NewTLVReader(payload)
	for d.Next() {
		if d.FieldID() == 2 {
			out = coordwire.AppendNestedField(out, 2, f.Append)
		} else {
			out = append(out, d.RawField()...)
		}
	}
	return out, true, nil
}

// operationResultImage returns the result (field 2) of an OPERATION
// record payload.
func operationResultImage(payload []byte) ([]byte, error) {
	var img []byte
	d := coordwire.NewTLVReader(payload)
	for d.Next() {
		if d.FieldID() == 2 {
			img = d.Known()
		}
	}
	if d.Err() != nil || img == nil {
		return nil, fmt.Errorf("core: OPERATION record without a result: %w", coordstore.ErrCorrupt)
	}
	return img, nil
}

// EventResultNeeds returns the ResultView a reader needs to see event e
// whole: for an OPERATION_CHANGED event the kinds its result's
// references name (see FilterResult), zero for every other event and for
// a result without a reference. FilterEvent changes e for p exactly when
// ResultViewOf(p) lacks one of these bits. It reads a few bytes and
// allocates nothing; a malformed OPERATION_CHANGED payload needs every
// bit (FilterEvent reports it).
func EventResultNeeds(e coordstore.Event) ResultView {
	if e.Kind != coordwire.EventOperationChanged {
		return 0
	}
	rec, ok := eventRecordPayload(e.Payload)
	if !ok {
		return ^ResultView(0)
	}
	img, err := operationResultImage(rec)
	if err != nil {
		return ^ResultView(0)
	}
	return resultNeeds(img)
}

// Covers reports whether a reader of view v sees every kind of need
// (an EventResultNeeds value): such a reader sees the event whole.
func (v ResultView) Covers(need ResultView) bool { return v.covers(need) }

// eventRecordPayload returns the record payload of an event payload that
// is one complete SnapshotRecord (§7): ObjectRef 18 || revision 8 ||
// schema 2 || u32 payload_len || payload.
func eventRecordPayload(b []byte) ([]byte, bool) {
	const head = coordwire.SnapshotRecordHeaderSize
	if len(b) < head || uint64(len(b)-head) != uint64(binary.BigEndian.Uint32(b[head-4:head])) {
		return nil, false
	}
	return b[head:], true
}

// FilterEvent returns e as p may see it: an OPERATION_CHANGED event's
// record through FilterOperationPayload (its SnapshotRecord's payload and
// payload_len rewritten), any other event as it is. It returns e itself,
// and changed false, when nothing is omitted.
func FilterEvent(p Principal, e coordstore.Event) (out coordstore.Event, changed bool, err error) {
	if e.Kind != coordwire.EventOperationChanged {
		return e, false, nil
	}
	rec, ok := eventRecordPayload(e.Payload)
	if !ok {
		return e, false, fmt.Errorf("core: OPERATION event payload is not one SnapshotRecord: %w", coordstore.ErrCorrupt)
	}
	f, changed, err := FilterOperationPayload(p, rec)
	if err != nil || !changed {
		return e, false, err
	}
	const head = coordwire.SnapshotRecordHeaderSize
	b := make([]byte, head, head+len(f))
	copy(b, e.Payload[:head])
	binary.BigEndian.PutUint32(b[head-4:head], uint32(len(f)))
	e.Payload = append(b, f...)
	return e, true, nil
}
