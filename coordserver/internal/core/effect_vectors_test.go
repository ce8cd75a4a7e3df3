package core_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// TestOutboxRowsMatchTheVectors builds the outbox rows the core writes —
// core.SpawnEffect from the START_RUN fields a SPAWN vector's target and
// payload carry, core.KillEffect from the KILL vector's binding ref — and
// requires the committed conformance vectors' bytes (vectors/effects.json):
// the effect digest of effect/digest/*, and the whole EffectAttempt image of
// effect/attempt/* for the same EffectAttemptId and OperationId. So the
// digest the outbox stores and the dedupe adapters are keyed by is the one
// the vectors pin for every port.
func TestOutboxRowsMatchTheVectors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "vectors", "effects.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := new(vectorspb.VectorFile)
	if err := protojson.Unmarshal(b, f); err != nil {
		t.Fatal(err)
	}
	all := map[string]*vectorspb.Vector{}
	for _, v := range f.GetVectors() {
		all[v.GetName()] = v
	}
	attempt := func(name string) coordwire.EffectAttempt {
		t.Helper()
		v := all[name]
		if v == nil {
			t.Fatalf("no vector %s", name)
		}
		var a coordwire.EffectAttempt
		if err := a.Decode(v.GetValue().GetImage()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return a
	}
	for _, name := range []string{"SPAWN/PENDING_SPAWN", "SPAWN/PENDING_SPAWN/empty_document"} {
		c := all["effect/digest/"+name].GetEffectDigest()
		var tg coordwire.EffectTarget
		var p coordwire.EffectPayload
		if err := tg.Decode(c.GetTarget()); err != nil {
			t.Fatal(err)
		}
		if err := p.DecodeAs(coordwire.EffectSpawn, c.GetPayload()); err != nil {
			t.Fatal(err)
		}
		sr := &coordwire.StartRun{WorkSessionID: p.WorkSessionID, ExecutorSchema: p.ExecutorSchema, ExecutorDocument: p.ExecutorDocument,
			PendingBindingID: tg.PendingBindingID, OwnerAuthorityFingerprint: tg.OwnerAuthorityFingerprint, OwnerIncarnation: tg.OwnerIncarnation,
			TerminalGroup: tg.Group}
		ref := attempt("effect/attempt/SPAWN/PENDING_SPAWN/READY")
		row := core.SpawnEffect(ref.ID, ref.OperationID, sr)
		if !bytes.Equal(row.EffectDigest[:], c.GetDigest()) {
			t.Errorf("%s: the core's SPAWN digest %x, the vector's %x", name, row.EffectDigest, c.GetDigest())
		}
		if name == "SPAWN/PENDING_SPAWN" && !bytes.Equal(row.Append(nil), all["effect/attempt/SPAWN/PENDING_SPAWN/READY"].GetValue().GetImage()) {
			t.Errorf("the core's READY SPAWN row differs from effect/attempt/SPAWN/PENDING_SPAWN/READY")
		}
	}
	kill := attempt("effect/attempt/KILL/ACTIVE_BINDING/READY")
	row := core.KillEffect(kill.ID, kill.OperationID, kill.Target.Binding)
	if !bytes.Equal(row.EffectDigest[:], all["effect/digest/KILL/ACTIVE_BINDING"].GetEffectDigest().GetDigest()) {
		t.Errorf("the core's KILL digest %x differs from effect/digest/KILL/ACTIVE_BINDING", row.EffectDigest)
	}
	if !bytes.Equal(row.Append(nil), all["effect/attempt/KILL/ACTIVE_BINDING/READY"].GetValue().GetImage()) {
		t.Errorf("the core's READY KILL row differs from effect/attempt/KILL/ACTIVE_BINDING/READY")
	}
}
