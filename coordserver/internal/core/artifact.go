package core

import (
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// registerArtifact executes REGISTER_ARTIFACT_MANIFEST (ADDENDUM C.6)
// inside tx: see Execute.
func (x Exec) registerArtifact(tx coordstore.Tx, last uint64, p Principal, pl *coordwire.RegisterArtifactManifest) (coordwire.OperationResult, error) {
	return coordwire.OperationResult{}, errInternal
}
