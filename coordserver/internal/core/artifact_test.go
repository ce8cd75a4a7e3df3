package core_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

var registrar = core.Principal{KeyID: key(1), Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, Caps: coordwire.CapArtifactManifests}

func manifest(ws coordwire.WorkSessionID, media string, size uint64) []byte {
	d := coordwire.ArtifactManifestDoc{WorkSessionID: ws, MediaType: media, Size: size, ContentSHA256: [32]byte{byte(size)}}
	return d.AppendTLV(nil)
}

func register(id coordwire.ArtifactID, rev coordwire.ObjectRevision, man []byte) *coordwire.RegisterArtifactManifest {
	return &coordwire.RegisterArtifactManifest{ArtifactID: id, Revision: rev, Schema: 1, Manifest: man}
}

// TestRegisterArtifactManifest: the C.6 revision rules (first 1, then
// exactly latest+1), both records revised in one transaction with their
// own events, an exact retry returning the stored result, and every
// refusal leaving the store unchanged.
func TestRegisterArtifactManifest(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		w := newWorld(t, s, 1)
		w2 := newWorld(t, s, 2)
		art := coordwire.ArtifactID{0x5a, 1}
		last := lastSeq(t, s)
		out := mustRun(t, s, t0, registrar, frame(t, oid(1), register(art, 1, manifest(w.ws, "text/plain", 5))))
		evs := eventsAfter(t, s, last)
		diff(t, []coordwire.EventKind{coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventOperationChanged}, kinds(evs))
		if evs[0].Object.Kind != coordwire.ObjectKindArtifact || evs[1].Object.Kind != coordwire.ObjectKindArtifactManifest || evs[0].ObjectRevision != 1 || evs[1].ObjectRevision != 1 {
			t.Fatalf("events %+v %+v", evs[0].Object, evs[1].Object)
		}
		ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindArtifact, ID: art}
		diff(t, coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: coordwire.EventSequence(evs[2].Sequence),
			ResultKind: coordwire.ResultObjectRef, ResultPayload: ref.Append(nil)}, out.Result)
		stub, rev, _ := record[coordwire.ArtifactRecord](t, s, coordwire.ObjectKindArtifact, art)
		diff(t, coordwire.ArtifactRecord{WorkSessionID: w.ws, LatestRevision: 1}, stub)
		if rev != 1 {
			t.Fatalf("stub revision %d", rev)
		}

		// An exact retry: the stored result, nothing written.
		before := dump(t, s)
		again := mustRun(t, s, t0, registrar, frame(t, oid(1), register(art, 1, manifest(w.ws, "text/plain", 5))))
		if again.Wrote || cmpDiff(out.Result, again.Result) != "" {
			t.Fatalf("retry %+v", again)
		}
		diff(t, before, dump(t, s))

		// The next revision, exactly latest + 1.
		mustRun(t, s, t0, registrar, frame(t, oid(2), register(art, 2, manifest(w.ws, "text/plain", 6))))
		man, rev, _ := record[coordwire.ArtifactManifestRecord](t, s, coordwire.ObjectKindArtifactManifest, art)
		diff(t, coordwire.ArtifactManifestRecord{ArtifactID: art, Revision: 2, Schema: 1, Manifest: manifest(w.ws, "text/plain", 6)}, man)
		if rev != 2 {
			t.Fatalf("manifest revision %d", rev)
		}

		// The evidence artifact of an ended binding.
		if err := w2.end(t, coordwire.EndOwnerLost, nil); err != nil {
			t.Fatal(err)
		}
		_, ev := recordsOf[coordwire.EvidenceRecord](t, s, coordwire.ObjectKindEvidence)
		evidenceArt := ev[0].ArtifactID

		unknownField := append(manifest(w.ws, "text/plain", 7), coordwire.AppendFieldU8(nil, 9, 1)...)
		missing := coordwire.AppendFieldBytes(nil, 1, w.ws[:])
		for _, c := range []struct {
			name   string
			p      core.Principal
			pl     *coordwire.RegisterArtifactManifest
			code   coordwire.ErrorCode
			reason string
		}{
			{"same_revision_again", registrar, register(art, 2, manifest(w.ws, "text/plain", 7)), coordwire.RevisionConflict, "artifact.revision"},
			{"revision_skipped", registrar, register(art, 4, manifest(w.ws, "text/plain", 7)), coordwire.RevisionConflict, "artifact.revision"},
			{"revision_lower", registrar, register(art, 1, manifest(w.ws, "text/plain", 7)), coordwire.RevisionConflict, "artifact.revision"},
			{"new_artifact_not_1", registrar, register(coordwire.ArtifactID{0x5a, 2}, 2, manifest(w.ws, "text/plain", 7)), coordwire.RevisionConflict, "artifact.revision"},
			{"other_work_session", registrar, register(art, 3, manifest(w2.ws, "text/plain", 7)), coordwire.RevisionConflict, "artifact.work_session"},
			{"absent_work_session", registrar, register(coordwire.ArtifactID{0x5a, 3}, 1, manifest(coordwire.WorkSessionID{0x3a, 9}, "text/plain", 7)), coordwire.NotFound, "work_session.not_found"},
			{"invisible_work_session", core.Principal{KeyID: key(1), Scope: coordwire.ScopeWorkCommand, Caps: coordwire.CapArtifactManifests},
				register(coordwire.ArtifactID{0x5a, 3}, 1, manifest(w.ws, "text/plain", 7)), coordwire.NotFound, "work_session.not_found"},
			{"evidence_artifact", core.Principal{KeyID: key(1), Scope: registrar.Scope | coordwire.ScopeArtifactRead, Caps: registrar.Caps},
				register(evidenceArt, 2, manifest(w2.ws, "text/plain", 7)), coordwire.RevisionConflict, "artifact.evidence"},
			// registrar may not see manifests (no ARTIFACT_READ): the
			// refusal does not say the artifact is evidence.
			{"evidence_artifact_manifests_hidden", registrar, register(evidenceArt, 2, manifest(w2.ws, "text/plain", 7)), coordwire.RevisionConflict, "artifact.revision"},
			{"schema_2", registrar, &coordwire.RegisterArtifactManifest{ArtifactID: art, Revision: 3, Schema: 2, Manifest: manifest(w.ws, "text/plain", 7)}, coordwire.CapabilityRequired, "schema.unsupported"},
			{"unknown_field", registrar, register(art, 3, unknownField), coordwire.MalformedMessage, "manifest.noncanonical"},
			{"missing_field", registrar, register(art, 3, missing), coordwire.MalformedMessage, "tlv.missing_field"},
			{"empty_media_type", registrar, register(art, 3, manifest(w.ws, "", 7)), coordwire.MalformedMessage, "manifest.empty_media_type"},
			{"reserved_media_type", registrar, register(art, 3, manifest(w.ws, core.EvidenceMediaType, 7)), coordwire.MalformedMessage, "manifest.reserved_media_type"},
			{"no_capability", core.Principal{KeyID: key(1), Scope: registrar.Scope}, register(art, 3, manifest(w.ws, "text/plain", 7)), coordwire.CapabilityRequired, "capability.artifact_manifests"},
			{"no_work_command", core.Principal{KeyID: key(1), Scope: coordwire.ScopeWorkRead | coordwire.ScopeArtifactRead, Caps: coordwire.KnownCapabilities}, register(art, 3, manifest(w.ws, "text/plain", 7)), coordwire.ScopeDenied, "scope.work_command"},
		} {
			t.Run(c.name, func(t *testing.T) {
				before := dump(t, s)
				_, err := run(t, s, t0, c.p, frame(t, oid(0x80), c.pl))
				wantRefusal(t, err, c.code, c.reason)
				checkDiagnostic(t, err)
				diff(t, before, dump(t, s))
			})
		}
	})
}
