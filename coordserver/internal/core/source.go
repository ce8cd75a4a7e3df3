package core

import (
	"bytes"
	"errors"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/simbug"
)

// OwnerIdentity is the authenticated terminal owner a source fact comes
// from (§11, ADDENDUM C.8): its owner authority fingerprint and its
// current IncarnationId. The server's owner port fills it from the
// registration, never from the fact.
type OwnerIdentity struct {
	Fingerprint [32]byte
	Incarnation coordwire.IncarnationID
}

// SourceAdmissionKind is what the admission of one TerminalSourceFact did
// (§11).
type SourceAdmissionKind uint8

// The values of SourceAdmissionKind.
const (
	// SourceAdmitted: the exact-next fact was admitted and the source
	// sequence advanced (one SOURCE_FACT_ADMITTED event).
	SourceAdmitted SourceAdmissionKind = 1
	// SourceJumped: the fact skipped sequences; the missing inclusive range
	// [GapFrom, GapTo] was recorded as SOURCE_GAP/Jump, then the fact was
	// admitted and the source sequence advanced to it.
	SourceJumped SourceAdmissionKind = 2
	// SourceConflicted: the fact repeated a retained sequence of the
	// binding (its last admitted one or any below it) with other content;
	// SOURCE_GAP/Conflict was recorded, the fact was NOT admitted, and the
	// binding ended evidence-incomplete (reason Failed, see EndBinding).
	SourceConflicted SourceAdmissionKind = 3
)

// String returns the name of k.
func (k SourceAdmissionKind) String() string {
	switch k {
	case SourceAdmitted:
		return "ADMITTED"
	case SourceJumped:
		return "JUMPED"
	case SourceConflicted:
		return "CONFLICTED"
	}
	return "SourceAdmissionKind(?)"
}

// SourceAdmission is the result of AdmitSourceFact. Every refusal is an
// error instead (nothing written).
//
// The "stored result" of an admitted fact is not a separate row: it is
// derived from the retained facts themselves. An identical repeat of a
// retained sequence while the binding is active returns Duplicate=true
// with the Kind and gap range of the original admission (SourceJumped with
// [GapFrom, GapTo] when the previous retained fact is not the sequence
// just before it, SourceAdmitted otherwise), the same Binding and
// Sequence, EventSequence 0 (no event is appended) and Ended false.
// Everything but EventSequence is therefore exactly what the first
// admission returned. After the binding ended the repeat is refused like
// every other fact (§11 "Every fact after binding end is refused").
type SourceAdmission struct {
	Kind      SourceAdmissionKind
	Duplicate bool // an identical repeat: the stored result, nothing written
	Binding   coordwire.BindingID
	Sequence  coordwire.SourceSequence // the fact's sequence
	// GapFrom and GapTo are the exact missing inclusive range of a jump
	// (SourceJumped); zero otherwise.
	GapFrom, GapTo coordwire.SourceSequence
	// EventSequence is the sequence of the event this call appended for
	// the fact: SOURCE_FACT_ADMITTED (Admitted, Jumped) or SOURCE_GAP
	// (Conflicted); 0 for a duplicate.
	EventSequence coordwire.EventSequence
	// Ended reports that this call ended the binding (a CLOSED fact, or a
	// conflict); false for a duplicate (only answered while active).
	Ended bool
}

// AdmitSourceFact is the exact source-admission state machine of §11 for
// one TerminalSourceFact from the authenticated owner, inside tx at now.
// See the long description in docs/semantics.md ("Source facts, binding
// ends, evidence, artifacts and signals"); in order:
//
//  1. f must be a valid schema-1 fact whose payload is the canonical image
//     of its kind (MALFORMED_MESSAGE with coordwire's reasons:
//     "source_fact.schema", "enum.source_fact_kind", "id.zero",
//     "seq.zero", the payload's reasons, "source_fact.noncanonical");
//  2. the fact must name the authenticated owner: another fingerprint is
//     SCOPE_DENIED "source.owner", another incarnation SCOPE_DENIED
//     "source.incarnation";
//  3. the binding must exist (NOT_FOUND "binding.not_found") and belong to
//     that owner and incarnation (SCOPE_DENIED as in 2);
//  4. every fact of an ended binding — an identical repeat of a fact
//     admitted before the end too — is REVISION_CONFLICT
//     "source.binding_ended";
//  5. an identical repeat (same canonical image) of a retained sequence
//     returns its stored result, Duplicate=true, nothing written;
//  6. a retained sequence with other content (the last admitted one or
//     any below it) records SOURCE_GAP/Conflict (expected_source the
//     highest retained sequence + 1, observed_source the fact's) and ends
//     the binding (Failed, evidence sealed gapped, EVIDENCE_GAP);
//  7. with last the highest retained sequence of the binding (0: none), a
//     sequence below last that is not retained (inside a recorded jump's
//     missing range) is REVISION_CONFLICT "source.stale_sequence";
//     sequence last+1 is admitted (AppendSourceFact and
//     SOURCE_FACT_ADMITTED, whose object revision is the BINDING's current
//     one: the record itself is not revised, its source position is the
//     retained facts until EndBinding stores it); a higher one first
//     records SOURCE_GAP/Jump with the exact missing range and is then
//     admitted the same way;
//  8. an admitted CLOSED fact ends the binding in the same transaction
//     (EndBinding with Completed for exit status 0, Failed for any other or
//     an absent exit status — Cancelled when a KILL of the binding is live
//     or has succeeded; RUN.outcome is the CLOSED payload image).
//
// On an error nothing may be committed.
func (x Exec) AdmitSourceFact(tx coordstore.Tx, now time.Time, owner OwnerIdentity, f coordwire.TerminalSourceFact) (SourceAdmission, error) {
	return x.admitSourceFact(tx, now, owner, f)
}

func (x Exec) admitSourceFact(tx coordstore.Tx, now time.Time, owner OwnerIdentity, f coordwire.TerminalSourceFact) (SourceAdmission, error) {
	img, err := canonicalFact(&f)
	if err != nil {
		return SourceAdmission{}, err
	}
	if err := checkOwner(owner, f.Source.OwnerAuthorityFingerprint, f.Source.OwnerIncarnation); err != nil {
		return SourceAdmission{}, err
	}
	id, seq := f.Source.BindingID, uint64(f.Source.Sequence)
	b, err := tx.Binding(id)
	if errors.Is(err, coordstore.ErrNotFound) {
		return SourceAdmission{}, refuse(coordwire.NotFound, "binding.not_found")
	}
	if err != nil {
		return SourceAdmission{}, storeErr("binding", err)
	}
	if err := checkOwner(owner, b.Ref.OwnerAuthorityFingerprint, b.Ref.OwnerIncarnation); err != nil {
		return SourceAdmission{}, err
	}
	// §11 "Every fact after binding end is refused": also an identical
	// repeat of a fact admitted before the end.
	if b.Ended {
		return SourceAdmission{}, refuse(coordwire.RevisionConflict, "source.binding_ended")
	}
	stored, err := tx.SourceFact(id, seq)
	have := err == nil
	if err != nil && !errors.Is(err, coordstore.ErrNotFound) {
		return SourceAdmission{}, storeErr("source fact", err)
	}
	if have && bytes.Equal(stored.Image, img) {
		return storedAdmission(tx, b, seq)
	}
	adm := SourceAdmission{Kind: SourceAdmitted, Binding: id, Sequence: f.Source.Sequence}
	if have {
		// "The same sequence with different content": a retained
		// sequence — the binding's last or any below it — resent with
		// other content. expected_source is the sequence the binding
		// expected next (its highest retained fact + 1), observed_source
		// the conflicting sequence, as for every SOURCE_GAP.
		head, err := lastFactFrom(tx, id, seq)
		if err != nil {
			return SourceAdmission{}, err
		}
		g := coordwire.SourceGapPayload{BindingID: id, ExpectedSource: head + 1, ObservedSource: seq, Reason: coordwire.SourceGapConflict}
		if head == ^uint64(0) {
			g.ExpectedSource = head // nothing can follow the last sequence
		}
		ev, err := x.appendEvent(tx, coordwire.EventSourceGap, b.Key(), b.Revision, g.Append(nil))
		if err != nil {
			return SourceAdmission{}, err
		}
		if err := x.endBinding(tx, now, id, coordwire.EndFailed, nil, true); err != nil {
			return SourceAdmission{}, err
		}
		adm.Kind, adm.EventSequence, adm.Ended = SourceConflicted, coordwire.EventSequence(ev), true
		return adm, nil
	}
	// seq is not retained. The binding's position is its highest retained
	// fact; a later one than seq means seq is below it (inside a recorded
	// jump's missing range): "a lower non-identical sequence is refused".
	if _, above, err := firstFactAfter(tx, id, seq); err != nil {
		return SourceAdmission{}, err
	} else if above {
		return SourceAdmission{}, refuse(coordwire.RevisionConflict, "source.stale_sequence")
	}

	last, err := lastFactBelow(tx, id, seq)
	if err != nil {
		return SourceAdmission{}, err
	}
	if seq > last+1 {
		adm.Kind, adm.GapFrom, adm.GapTo = SourceJumped, coordwire.SourceSequence(last+1), coordwire.SourceSequence(seq-1)
		g := coordwire.SourceGapPayload{BindingID: id, ExpectedSource: last + 1, ObservedSource: seq, Reason: coordwire.SourceGapJump}
		if _, err := x.appendEvent(tx, coordwire.EventSourceGap, b.Key(), b.Revision, g.Append(nil)); err != nil {
			return SourceAdmission{}, err
		}
	}
	if err := tx.AppendSourceFact(coordstore.SourceFact{Binding: id, Sequence: seq, Image: img}); err != nil {
		return SourceAdmission{}, storeErr("append source fact", err)
	}
	if simbug.On(simbug.FactRevisesBinding) {
		next, err := coordwire.ObjectRevision(b.Revision).Next()
		if err != nil {
			return SourceAdmission{}, err
		}
		b.Revision, b.SourceSequence = uint64(next), seq
		if err := tx.PutBinding(b); err != nil {
			return SourceAdmission{}, storeErr("put binding", err)
		}
	}
	ev, err := x.appendEvent(tx, coordwire.EventSourceFactAdmitted, b.Key(), b.Revision, img)
	if err != nil {
		return SourceAdmission{}, err
	}
	adm.EventSequence = coordwire.EventSequence(ev)
	if f.Kind == coordwire.SourceClosed {
		reason, err := closedReason(f.Payload)
		if err != nil {
			return SourceAdmission{}, err
		}
		// A CLOSED of a killed binding ends it Cancelled: the CANCEL_RUN
		// was admitted first, and C.4 ends its Run Cancelled. The kill is
		// live (the owner reported the exit before the dispatcher recorded
		// the kill's result), or its success was recorded and the binding
		// waits for this CLOSED (its Run is Cancelled already).
		if killing, err := liveKill(tx, id); err != nil {
			return SourceAdmission{}, err
		} else if killing && !simbug.On(simbug.ClosedDuringKill) {
			reason = coordwire.EndCancelled
		} else if killed, err := runCancelled(tx, b.Ref.WorkSessionID); err != nil {
			return SourceAdmission{}, err
		} else if killed {
			reason = coordwire.EndCancelled
		}
		if err := x.endBinding(tx, now, id, reason, f.Payload, false); err != nil {
			return SourceAdmission{}, err
		}
		adm.Ended = true
	}
	return adm, nil
}

// canonicalFact validates f exactly as coordwire decodes a
// TerminalSourceFact (schema 1, defined kind, nonzero ids and sequence,
// the kind's exact payload) and returns its canonical image. Every valid
// schema-1 payload has one image, so a payload the decoder accepts is
// canonical; the re-encoding check ("source_fact.noncanonical") guards
// that property of the codec.
func canonicalFact(f *coordwire.TerminalSourceFact) ([]byte, error) {
	if len(f.Payload) > coordwire.HardMaxTypedPayloadBytes {
		return nil, refuse(coordwire.MalformedMessage, "bytes.too_long")
	}
	img := f.Append(nil)
	var d coordwire.TerminalSourceFact
	if err := d.Decode(img); err != nil {
		return nil, err
	}
	p := coordwire.SourceFactPayload{Kind: d.Kind}
	if err := p.Decode(d.Payload); err != nil {
		return nil, err
	}
	if !bytes.Equal(p.Append(nil), d.Payload) {
		return nil, refuse(coordwire.MalformedMessage, "source_fact.noncanonical")
	}
	return img, nil
}

// checkOwner refuses a fingerprint or incarnation other than the
// authenticated owner's.
func checkOwner(owner OwnerIdentity, fp [32]byte, inc coordwire.IncarnationID) error {
	if fp != owner.Fingerprint {
		return refuse(coordwire.ScopeDenied, "source.owner")
	}
	if inc != owner.Incarnation {
		return refuse(coordwire.ScopeDenied, "source.incarnation")
	}
	return nil
}

// liveKill reports whether a READY or DISPATCHED KILL row targets the
// binding.
func liveKill(tx coordstore.ReadTx, id coordwire.BindingID) (bool, error) {
	found := false
	err := liveEffects(tx, func(e Effect) bool {
		if e.Attempt.Kind == coordwire.EffectKill && e.Attempt.Target.Binding.BindingID == id {
			found = true
			return false
		}
		return true
	})
	return found, err
}

// closedReason is the end reason of an admitted CLOSED fact: Completed
// for exit status 0; Failed for any other status and when the owner could
// not report one (success is not proven).
func closedReason(payload []byte) (coordwire.EndReason, error) {
	p := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed}
	if err := p.Decode(payload); err != nil {
		return 0, err
	}
	if p.HasExitStatus && p.ExitStatus == 0 {
		return coordwire.EndCompleted, nil
	}
	return coordwire.EndFailed, nil
}

// storedAdmission is the stored result of the retained fact seq of b (see
// SourceAdmission): a jump when the retained fact before it is not seq-1.
func storedAdmission(tx coordstore.ReadTx, b coordstore.Binding, seq uint64) (SourceAdmission, error) {
	adm := SourceAdmission{Kind: SourceAdmitted, Duplicate: true, Binding: b.ID, Sequence: coordwire.SourceSequence(seq), Ended: b.Ended}
	prev, err := lastFactBelow(tx, b.ID, seq)
	if err != nil {
		return SourceAdmission{}, err
	}
	if prev+1 != seq {
		adm.Kind, adm.GapFrom, adm.GapTo = SourceJumped, coordwire.SourceSequence(prev+1), coordwire.SourceSequence(seq-1)
	}
	return adm, nil
}

// firstFactAfter returns the first retained fact sequence of binding id
// above seq (one seek, not a scan).
func firstFactAfter(tx coordstore.ReadTx, id coordwire.BindingID, seq uint64) (uint64, bool, error) {
	for f, err := range tx.SourceFacts(id, seq) {
		if err != nil {
			return 0, false, storeErr("source facts", err)
		}
		return f.Sequence, true, nil
	}
	return 0, false, nil
}

// lastFactFrom returns the highest retained fact sequence of binding id,
// given that seq is retained (it scans the facts above seq only).
func lastFactFrom(tx coordstore.ReadTx, id coordwire.BindingID, seq uint64) (uint64, error) {
	last := seq
	for f, err := range tx.SourceFacts(id, seq) {
		if err != nil {
			return 0, storeErr("source facts", err)
		}
		last = f.Sequence
	}
	return last, nil
}

// lastFactBelow returns the highest retained fact sequence of binding id
// below seq (0: none). The common case — the fact just before — is one
// lookup; only a jump scans the retained facts.
func lastFactBelow(tx coordstore.ReadTx, id coordwire.BindingID, seq uint64) (uint64, error) {
	if seq <= 1 {
		return 0, nil
	}
	_, err := tx.SourceFact(id, seq-1)
	switch {
	case err == nil:
		return seq - 1, nil
	case !errors.Is(err, coordstore.ErrNotFound):
		return 0, storeErr("source fact", err)
	}
	var prev uint64
	for f, err := range tx.SourceFacts(id, 0) {
		if err != nil {
			return 0, storeErr("source facts", err)
		}
		if f.Sequence >= seq {
			break
		}
		prev = f.Sequence
	}
	return prev, nil
}

// The diagnostics of the source, binding, artifact and signal reasons
// (kept here, beside the code that refuses them).
func init() {
	for r, d := range map[string]string{
		"source.owner":                  "the fact names or targets another owner than the authenticated one",
		"source.incarnation":            "the fact names or targets another incarnation than the authenticated owner's",
		"source.binding_ended":          "the binding has ended; no further fact is admitted",
		"source.stale_sequence":         "a source sequence below the binding's last admitted one that was never admitted",
		"source_fact.noncanonical":      "the source fact payload is not its canonical image",
		"binding.not_found":             "no such binding",
		"binding.ended":                 "the binding has already ended",
		"binding.used":                  "the pending binding id was already used by an earlier spawn",
		"work_session.not_found":        "no such work session",
		"signal.not_found":              "no such signal",
		"signal.state":                  "the signal's state does not allow this change",
		"signal.invalid":                "invalid signal kind or message",
		"artifact.revision":             "an artifact manifest revision must be 1 for a new artifact, else the latest + 1",
		"artifact.work_session":         "the artifact belongs to another work session",
		"artifact.evidence":             "evidence artifacts are the server's and cannot be revised",
		"manifest.noncanonical":         "the artifact manifest is not the canonical schema-1 image",
		"manifest.reserved_media_type":  "this media type is reserved for the server's evidence artifacts",
		"capability.signals":            "signal commands need the negotiated SIGNALS capability",
		"scope.signal_ack":              "signal commands need the SIGNAL_ACK scope",
		"capability.artifact_manifests": "REGISTER_ARTIFACT_MANIFEST needs the negotiated ARTIFACT_MANIFESTS capability",
		"id.exhausted":                  "the server id source repeated used ids",
	} {
		diagnostics[r] = d
	}
}
