package core

import (
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
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
	// SourceConflicted: the fact repeated the binding's last admitted
	// sequence with other content; SOURCE_GAP/Conflict was recorded, the
	// fact was NOT admitted, and the binding ended evidence-incomplete
	// (reason Failed, see EndBinding).
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
// retained sequence returns Duplicate=true with the Kind and gap range of
// the original admission (SourceJumped with [GapFrom, GapTo] when the
// previous retained fact is not the sequence just before it, SourceAdmitted
// otherwise), the same Binding and Sequence, EventSequence 0 (no event is
// appended) and Ended as the binding is now. Everything but EventSequence
// is therefore exactly what the first admission returned, once the
// binding's later history is taken into account (Ended).
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
	// Ended reports that the binding is ended after this call: by this
	// fact (a CLOSED fact, or a conflict) or, for a duplicate, earlier.
	Ended bool
}

// AdmitSourceFact is the exact source-admission state machine of §11 for
// one TerminalSourceFact from the authenticated owner, inside tx at now.
// See the long description in docs/semantics.md ("Runs, source facts and
// evidence"); in order:
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
//  4. an identical repeat (same canonical image) of a retained sequence
//     returns its stored result, Duplicate=true, nothing written — also
//     after the binding ended, because it is the fact admitted before the
//     end, not a new one;
//  5. any other fact of an ended binding is REVISION_CONFLICT
//     "source.binding_ended";
//  6. sequence last+1 is admitted (AppendSourceFact, BINDING revised with
//     the advanced source sequence, SOURCE_FACT_ADMITTED); a higher one
//     first records SOURCE_GAP/Jump with the exact missing range and is
//     then admitted the same way; the sequence equal to last with other
//     content records SOURCE_GAP/Conflict and ends the binding (Failed,
//     evidence-incomplete); a lower non-identical one is REVISION_CONFLICT
//     "source.stale_sequence";
//  7. an admitted CLOSED fact ends the binding in the same transaction
//     (EndBinding with Completed for exit status 0, Failed for any other or
//     an absent exit status; RUN.outcome is the CLOSED payload image).
//
// On an error nothing may be committed.
func (x Exec) AdmitSourceFact(tx coordstore.Tx, now time.Time, owner OwnerIdentity, f coordwire.TerminalSourceFact) (SourceAdmission, error) {
	return x.admitSourceFact(tx, now, owner, f)
}

func (x Exec) admitSourceFact(tx coordstore.Tx, now time.Time, owner OwnerIdentity, f coordwire.TerminalSourceFact) (SourceAdmission, error) {
	return SourceAdmission{}, errInternal // filled in by the next commit
}
