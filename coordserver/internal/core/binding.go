package core

import (
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// EndBinding ends the active binding id inside tx at now, with reason
// (§11, ADDENDUM C.4, C.7). It writes, in this order:
//
//   - when no CLOSED fact was admitted, a SOURCE_GAP/Ended event
//     (expected_source = last admitted + 1, observed_source = 0: the source
//     ended without its close), so the evidence is gapped;
//   - the BINDING Ended with reason and EndedAt = now, and BINDING_ENDED;
//   - the RUN of the binding's WorkSession in its terminal state —
//     Completed, Failed, Cancelled for those reasons, Failed for
//     OwnerLost — with RUN.outcome = outcome (nil: absent), and
//     RUN_CHANGED; a Run already Completed, Cancelled or Failed keeps its
//     state and outcome;
//   - the WORK_SESSION Ended with active_binding cleared, and
//     WORK_SESSION_CHANGED (skipped when already Ended without it);
//   - the evidence seal of C.7: an evidence ARTIFACT stub and its
//     ARTIFACT_MANIFEST (media type EvidenceMediaType, content = the seal
//     preimage, so content_sha256 = seal_sha256) with their
//     ARTIFACT_REVISION_ADDED events, then the EVIDENCE record and
//     EVIDENCE_SEALED;
//   - for a gapped (Jump or Ended gap) or conflicted binding, an Open
//     EVIDENCE_GAP Signal on the WorkSession (SIGNAL_RAISED);
//   - SIGNAL_RESOLVED for every unresolved EXECUTION_BLOCKED Signal of the
//     WorkSession: the Run it blocked has ended.
//
// An absent binding is NOT_FOUND "binding.not_found", an already ended one
// REVISION_CONFLICT "binding.ended" (nothing written), an undefined reason
// MALFORMED_MESSAGE "enum.end_reason". On an error nothing may be
// committed.
func (x Exec) EndBinding(tx coordstore.Tx, now time.Time, id coordwire.BindingID, reason coordwire.EndReason, outcome []byte) error {
	return x.endBinding(tx, now, id, reason, outcome, false)
}

// EvidenceMediaType is the media type of the evidence artifact registered
// for every sealed binding (ADDENDUM C.7). Its content is the exact
// seal_sha256 preimage ("phux-coordinator-evidence/v1\0" || binding_id ||
// fact_count || each canonical TerminalSourceFact), so the manifest's
// content_sha256 equals the EVIDENCE record's seal_sha256 and its size is
// the preimage length.
const EvidenceMediaType = "application/vnd.phux.coordinator-evidence.v1"

func (x Exec) endBinding(tx coordstore.Tx, now time.Time, id coordwire.BindingID, reason coordwire.EndReason, outcome []byte, conflicted bool) error {
	return errInternal // filled in by the next commit
}
