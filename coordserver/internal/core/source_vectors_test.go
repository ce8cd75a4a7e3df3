package core_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// TestSourceVectorsMatchTheCore replays the bindings of the committed
// evidence/seal/* vectors (vectors/effects.json) through the core's §11
// admission — the admitted facts in order, then the conflicting fact of a
// conflicted binding (another fact at its sequence 2) or an owner loss —
// and requires the vectors' bytes: the SOURCE_GAP payload the core
// records is the matching source_gap/* image, and the evidence seal is
// the vector's digest. So the vectors describe what this implementation
// writes, the conflict below the last fact included.
func TestSourceVectorsMatchTheCore(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "vectors", "effects.json"))
	if err != nil {
		t.Fatal(err)
	}
	file := new(vectorspb.VectorFile)
	if err := protojson.Unmarshal(b, file); err != nil {
		t.Fatal(err)
	}
	all := map[string]*vectorspb.Vector{}
	for _, v := range file.GetVectors() {
		all[v.GetName()] = v
	}
	for _, c := range []struct {
		seal, gap string
		conflict  bool // another fact at sequence 2 after the admitted ones
		lost      bool // the owner is lost after the admitted ones
	}{
		{seal: "gapped", gap: "JUMP"},
		{seal: "conflicted", gap: "CONFLICT", conflict: true},
		{seal: "conflicted_below_head", gap: "CONFLICT/below_head", conflict: true},
		{seal: "opened_only", gap: "ENDED", lost: true},
	} {
		t.Run(c.seal, func(t *testing.T) {
			sv, gv := all["evidence/seal/"+c.seal], all["source_gap/"+c.gap]
			if sv == nil || gv == nil {
				t.Fatalf("missing vector evidence/seal/%s or source_gap/%s", c.seal, c.gap)
			}
			var facts []coordwire.TerminalSourceFact
			for _, img := range sv.GetEvidenceDigest().GetFacts() {
				var f coordwire.TerminalSourceFact
				if err := f.Decode(img); err != nil {
					t.Fatal(err)
				}
				facts = append(facts, f)
			}
			s := memstore.New(memstore.Config{})
			defer s.Close()
			activate(t, s, 1, 1)
			src := facts[0].Source
			w := newWorldOf(t, s, 1, src.BindingID,
				core.OwnerIdentity{Fingerprint: src.OwnerAuthorityFingerprint, Incarnation: src.OwnerIncarnation})
			for _, f := range facts {
				w.mustAdmit(t, f)
			}
			switch {
			case c.conflict:
				f := facts[1]
				if f.Source.Sequence != 2 {
					t.Fatalf("fact 2 of the vector is at sequence %d", f.Source.Sequence)
				}
				f.Kind, f.Payload = coordwire.SourceOpened, nil
				if adm := w.mustAdmit(t, f); adm.Kind != core.SourceConflicted {
					t.Fatalf("the other fact at sequence 2: %+v, want a conflict", adm)
				}
			case c.lost:
				if err := w.end(t, coordwire.EndOwnerLost, nil); err != nil {
					t.Fatal(err)
				}
			}
			var gaps [][]byte
			for _, e := range eventsAfter(t, s, 0) {
				if e.Kind == coordwire.EventSourceGap {
					gaps = append(gaps, e.Payload)
				}
			}
			if len(gaps) != 1 || !bytes.Equal(gaps[0], gv.GetValue().GetImage()) {
				t.Errorf("SOURCE_GAP payloads %x, want source_gap/%s %x", gaps, c.gap, gv.GetValue().GetImage())
			}
			if bd := binding(t, s, w.b); !bd.Ended {
				t.Fatal("the binding did not end")
			}
			_, seals := recordsOf[coordwire.EvidenceRecord](t, s, coordwire.ObjectKindEvidence)
			if len(seals) != 1 || !bytes.Equal(seals[0].SealSHA256[:], sv.GetEvidenceDigest().GetDigest()) {
				t.Errorf("evidence %+v, want the seal of evidence/seal/%s", seals, c.seal)
			}
		})
	}
}
