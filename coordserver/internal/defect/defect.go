// Package defect holds the server's injected defects: deliberate
// violations of the specification that exist only in a binary built with
// the phuxdefects build tag, so that the conformance runner
// (cmd/phux-coordcheck) can show it names the failing requirement for
// each. In every other build On is a constant false and the compiler
// removes the defective branches.
//
// A phuxdefects build reads the defect to inject from the environment
// variable PHUX_DEFECT (one of Names) once, at start.
package defect

// The defects, by the name PHUX_DEFECT selects.
const (
	// SkipGuardCheck: requests are served whatever their AuthorityGuard
	// (§4: a mismatch must be fatal STALE_AUTHORITY).
	SkipGuardCheck = "skip-guard-check"
	// CreditCountOnly: COORD_EVENT is sent when the count balance
	// suffices, whatever the byte balance (§10: both gate).
	CreditCountOnly = "credit-count-only"
	// GapWrongDeliveryCut: GAP's last_contiguous_delivery is one more
	// than what was delivered (§10, inv. 13).
	GapWrongDeliveryCut = "gap-wrong-delivery-cut"
	// DigestIgnoresPreconditions: the operation digest is computed
	// without the preconditions (§8: they are part of it).
	DigestIgnoresPreconditions = "digest-ignores-preconditions"
	// EventAfterGap: a subscription paused by GAP keeps sending new
	// events (§10, §15: none until healed).
	EventAfterGap = "event-after-gap"
)

// Names lists every defect.
var Names = []string{SkipGuardCheck, CreditCountOnly, GapWrongDeliveryCut, DigestIgnoresPreconditions, EventAfterGap}

// EnvVar names the environment variable a phuxdefects build reads.
const EnvVar = "PHUX_DEFECT"
