package core

import "github.com/phuxcoord/coord/coordwire"

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
