package core

import (
	"bytes"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// checkManifest is the stateless policy check of REGISTER_ARTIFACT_MANIFEST
// (Validate step 5): schema 1 only (CAPABILITY_REQUIRED
// "schema.unsupported", as for documents); the manifest must decode
// strictly as the schema-1 document of C.6 (MALFORMED_MESSAGE with its
// reasons) and be exactly its canonical image — an unknown field or any
// other byte the canonical image lacks is MALFORMED_MESSAGE
// "manifest.noncanonical" (the record keeps the bytes, so they must be the
// document); the evidence media type is reserved for the server's own
// evidence artifacts (MALFORMED_MESSAGE "manifest.reserved_media_type").
func checkManifest(pl *coordwire.RegisterArtifactManifest) (coordwire.ArtifactManifestDoc, error) {
	var doc coordwire.ArtifactManifestDoc
	if err := checkSchema(pl.Schema); err != nil {
		return doc, err
	}
	if err := doc.DecodeTLV(pl.Manifest); err != nil {
		return doc, err
	}
	if !bytes.Equal(doc.AppendTLV(nil), pl.Manifest) {
		return doc, refuse(coordwire.MalformedMessage, "manifest.noncanonical")
	}
	if doc.MediaType == EvidenceMediaType {
		return doc, refuse(coordwire.MalformedMessage, "manifest.reserved_media_type")
	}
	return doc, nil
}

// registerArtifact executes REGISTER_ARTIFACT_MANIFEST (ADDENDUM C.6)
// inside tx for p, after the checks of Validate:
//
//   - the manifest's WorkSession must exist and be visible to p (NOT_FOUND
//     "work_session.not_found"); it may have ended (outputs are often
//     registered after the Run);
//   - a new artifact id needs revision 1, an existing one exactly
//     latest_revision + 1 (REVISION_CONFLICT "artifact.revision"), and the
//     same WorkSession (REVISION_CONFLICT "artifact.work_session");
//   - an evidence artifact (its manifest has EvidenceMediaType) is the
//     server's and cannot be revised (REVISION_CONFLICT
//     "artifact.evidence"; "artifact.revision" for a principal that may
//     not see manifests, since the media type is the manifest's);
//   - it writes the ARTIFACT stub (latest_revision = revision) and the
//     ARTIFACT_MANIFEST record, both at ObjectRevision = revision, each with
//     its ARTIFACT_REVISION_ADDED event, and returns SUCCEEDED
//     OBJECT_REF(ARTIFACT, id), which completes at the OPERATION_CHANGED
//     event Execute writes next.
func (x Exec) registerArtifact(tx coordstore.Tx, p Principal, pl *coordwire.RegisterArtifactManifest) (coordwire.OperationResult, error) {
	doc, err := checkManifest(pl)
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	var ws coordwire.WorkSessionRecord
	_, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, doc.WorkSessionID, &ws)
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	if !found || !Visible(p, coordwire.ObjectKindWorkSession, nil) {
		return coordwire.OperationResult{}, refuse(coordwire.NotFound, "work_session.not_found")
	}
	var stub coordwire.ArtifactRecord
	_, found, err = readRecord(tx, coordwire.ObjectKindArtifact, pl.ArtifactID, &stub)
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	switch {
	case !found:
		if pl.Revision != 1 {
			return coordwire.OperationResult{}, refuse(coordwire.RevisionConflict, "artifact.revision")
		}
	case stub.LatestRevision == ^coordwire.ObjectRevision(0) || pl.Revision != stub.LatestRevision+1:
		return coordwire.OperationResult{}, refuse(coordwire.RevisionConflict, "artifact.revision")
	case stub.WorkSessionID != doc.WorkSessionID:
		return coordwire.OperationResult{}, refuse(coordwire.RevisionConflict, "artifact.work_session")
	default:
		var man coordwire.ArtifactManifestRecord
		var old coordwire.ArtifactManifestDoc
		if _, ok, err := readRecord(tx, coordwire.ObjectKindArtifactManifest, pl.ArtifactID, &man); err != nil {
			return coordwire.OperationResult{}, err
		} else if ok && man.Schema == coordwire.ArtifactManifestSchema && old.DecodeTLV(man.Manifest) == nil && old.MediaType == EvidenceMediaType {
			// That it is evidence is the manifest's to tell: a principal
			// that may not see manifests gets the refusal without it.
			if !Visible(p, coordwire.ObjectKindArtifactManifest, nil) {
				return coordwire.OperationResult{}, refuse(coordwire.RevisionConflict, "artifact.revision")
			}
			return coordwire.OperationResult{}, refuse(coordwire.RevisionConflict, "artifact.evidence")
		}
	}
	if err := x.putArtifact(tx, pl.ArtifactID, pl.Revision, doc.WorkSessionID, pl.Manifest); err != nil {
		return coordwire.OperationResult{}, err
	}
	return objectRefResult(tx, coordwire.ObjectKindArtifact, pl.ArtifactID)
}

// putArtifact writes revision rev of artifact id: the ARTIFACT stub and
// the ARTIFACT_MANIFEST record (schema 1, manifest as given), both at
// ObjectRevision rev, each with its own ARTIFACT_REVISION_ADDED event.
func (x Exec) putArtifact(tx coordstore.Tx, id coordwire.ArtifactID, rev coordwire.ObjectRevision, ws coordwire.WorkSessionID, manifest []byte) error {
	stub := coordwire.ArtifactRecord{WorkSessionID: ws, LatestRevision: rev}
	if _, err := x.writeRecord(tx, coordwire.ObjectKindArtifact, id, uint64(rev), &stub, coordwire.EventArtifactRevisionAdded); err != nil {
		return err
	}
	man := coordwire.ArtifactManifestRecord{ArtifactID: id, Revision: rev, Schema: coordwire.ArtifactManifestSchema, Manifest: manifest}
	_, err := x.writeRecord(tx, coordwire.ObjectKindArtifactManifest, id, uint64(rev), &man, coordwire.EventArtifactRevisionAdded)
	return err
}
