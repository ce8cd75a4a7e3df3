package digest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// The reference implementations below build each preimage in a
// bytes.Buffer, straight from the specification text, and hash it with
// sha256.Sum256. They share no code with the package.

func be16(b *bytes.Buffer, v uint16) { binary.Write(b, binary.BigEndian, v) }
func be32(b *bytes.Buffer, v uint32) { binary.Write(b, binary.BigEndian, v) }
func be64(b *bytes.Buffer, v uint64) { binary.Write(b, binary.BigEndian, v) }

func domain(b *bytes.Buffer, name string) {
	b.WriteString("phux-coordinator-" + name + "/v1")
	b.WriteByte(0)
}

func refOperation(kind uint16, payload []byte, pre []coordwire.Precondition, ext []coordwire.RawField) [32]byte {
	var b bytes.Buffer
	domain(&b, "operation")
	be16(&b, 0)
	be16(&b, 1)
	be16(&b, kind)
	be32(&b, uint32(len(payload)))
	b.Write(payload)
	type img struct{ key, all []byte }
	var imgs []img
	for _, p := range pre {
		var k bytes.Buffer
		be16(&k, uint16(p.Object.Kind))
		k.Write(p.Object.ID[:])
		key := bytes.Clone(k.Bytes())
		be64(&k, p.ExpectedRevision)
		imgs = append(imgs, img{key, k.Bytes()})
	}
	sort.Slice(imgs, func(i, j int) bool { return bytes.Compare(imgs[i].key, imgs[j].key) < 0 })
	be16(&b, uint16(len(imgs)))
	for _, im := range imgs {
		b.Write(im.all)
	}
	var e bytes.Buffer
	for _, f := range ext {
		e.Write(f.Raw)
	}
	be32(&b, uint32(e.Len()))
	b.Write(e.Bytes())
	return sha256.Sum256(b.Bytes())
}

func refSnapshot(coord [16]byte, epoch, act, cut uint64, recs []coordwire.SnapshotRecord) [32]byte {
	var b bytes.Buffer
	domain(&b, "snapshot")
	b.Write(coord[:])
	be64(&b, epoch)
	be64(&b, act)
	be64(&b, cut)
	be64(&b, uint64(len(recs)))
	for _, r := range recs {
		be16(&b, uint16(r.Object.Kind))
		b.Write(r.Object.ID[:])
		be64(&b, uint64(r.Revision))
		be16(&b, r.SchemaVersion)
		be32(&b, uint32(len(r.Payload)))
		b.Write(r.Payload)
	}
	return sha256.Sum256(b.Bytes())
}

func refReplay(coord [16]byte, epoch, act uint64, sub [16]byte, after, cut uint64, evs []coordwire.ReplayEvent) [32]byte {
	var b bytes.Buffer
	domain(&b, "replay")
	b.Write(coord[:])
	be64(&b, epoch)
	be64(&b, act)
	b.Write(sub[:])
	be64(&b, after)
	be64(&b, cut)
	be64(&b, uint64(len(evs)))
	for _, e := range evs {
		be64(&b, uint64(e.EventSequence))
		b.Write(e.EventID[:])
		be16(&b, uint16(e.EventKind))
		be16(&b, uint16(e.Object.Kind))
		b.Write(e.Object.ID[:])
		be64(&b, uint64(e.ObjectRevision))
		be16(&b, e.Schema)
		be32(&b, uint32(len(e.Payload)))
		b.Write(e.Payload)
	}
	return sha256.Sum256(b.Bytes())
}

func refEffect(kind uint8, target, payload []byte) [32]byte {
	var b bytes.Buffer
	domain(&b, "effect")
	b.WriteByte(kind)
	be32(&b, uint32(len(target)))
	b.Write(target)
	be32(&b, uint32(len(payload)))
	b.Write(payload)
	return sha256.Sum256(b.Bytes())
}

func refEvidence(binding [16]byte, facts [][]byte) [32]byte {
	var b bytes.Buffer
	domain(&b, "evidence")
	b.Write(binding[:])
	be64(&b, uint64(len(facts)))
	for _, f := range facts {
		b.Write(f)
	}
	return sha256.Sum256(b.Bytes())
}

// Generators.

func genID(t *rapid.T, label string) [16]byte {
	var id [16]byte
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label))
	if id == [16]byte{} {
		id[15] = 1
	}
	return id
}

func genRef(t *rapid.T, label string) coordwire.ObjectRef {
	// A small id space and few kinds make equal kinds with different ids
	// (the second sort key) common.
	var id [16]byte
	id[0] = rapid.ByteRange(0, 3).Draw(t, label+".id0")
	id[15] = rapid.ByteRange(1, 255).Draw(t, label+".id15")
	return coordwire.ObjectRef{Kind: coordwire.ObjectKind(rapid.Uint16Range(1, 3).Draw(t, label+".kind")), ID: id}
}

func genPreconditions(t *rapid.T) []coordwire.Precondition {
	n := rapid.IntRange(0, coordwire.MaxPreconditions).Draw(t, "n")
	var out []coordwire.Precondition
	seen := map[coordwire.ObjectRef]bool{}
	for i := 0; i < n; i++ {
		r := genRef(t, "ref")
		if seen[r] {
			continue
		}
		seen[r] = true
		out = append(out, coordwire.Precondition{Object: r, ExpectedRevision: rapid.Uint64().Draw(t, "rev")})
	}
	return out
}

func genExtensions(t *rapid.T) []coordwire.RawField {
	n := rapid.IntRange(0, 4).Draw(t, "next")
	var out []coordwire.RawField
	id := uint64(6)
	for i := 0; i < n; i++ {
		id += rapid.Uint64Range(1, 300).Draw(t, "gap")
		v := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "val")
		out = append(out, coordwire.RawField{ID: id, Raw: coordwire.AppendFieldBytes(nil, id, v)})
	}
	return out
}

func TestOperationMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kind := coordwire.CommandKind(rapid.Uint16Range(1, 11).Draw(t, "kind"))
		payload := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "payload")
		pre := genPreconditions(t)
		ext := genExtensions(t)
		orig := append([]coordwire.Precondition(nil), pre...)
		got, err := digest.Operation(kind, payload, pre, ext)
		if err != nil {
			t.Fatalf("Operation: %v", err)
		}
		if want := refOperation(uint16(kind), payload, pre, ext); got != want {
			t.Fatalf("digest %x, reference %x", got, want)
		}
		if diff := cmp.Diff(orig, pre); diff != "" {
			t.Fatalf("Operation modified its preconditions (-before +after):\n%s", diff)
		}
		// Any permutation of the preconditions gives the same digest.
		perm := rapid.Permutation(pre).Draw(t, "perm")
		got2, err := digest.Operation(kind, payload, perm, ext)
		if err != nil || got2 != got {
			t.Fatalf("permuted preconditions: %x, %v; want %x", got2, err, got)
		}
	})
}

func TestOperationPreconditionEdgeCases(t *testing.T) {
	payload := []byte{1, 4, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	a := coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{1}}, ExpectedRevision: 3}
	b := coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte{9}}, ExpectedRevision: 0}
	c := coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{0, 1}}, ExpectedRevision: 7}

	dNil, err := digest.Operation(coordwire.CommandCancelRun, payload, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dEmpty, err := digest.Operation(coordwire.CommandCancelRun, payload, []coordwire.Precondition{}, []coordwire.RawField{})
	if err != nil {
		t.Fatal(err)
	}
	if dNil != dEmpty {
		t.Errorf("absent and present-empty preconditions differ: %x vs %x", dNil, dEmpty)
	}
	d1, _ := digest.Operation(coordwire.CommandCancelRun, payload, []coordwire.Precondition{a, b, c}, nil)
	d2, _ := digest.Operation(coordwire.CommandCancelRun, payload, []coordwire.Precondition{c, a, b}, nil)
	if d1 != d2 || d1 != refOperation(4, payload, []coordwire.Precondition{a, b, c}, nil) {
		t.Errorf("order dependence: %x vs %x", d1, d2)
	}
	if d1 == dNil {
		t.Error("preconditions do not change the digest")
	}

	for name, pre := range map[string][]coordwire.Precondition{
		"same revision":      {a, b, a},
		"different revision": {a, {Object: a.Object, ExpectedRevision: 99}},
	} {
		_, err := digest.Operation(coordwire.CommandCancelRun, payload, pre, nil)
		if !errors.Is(err, coordwire.MalformedMessage) || !errors.Is(err, &coordwire.Error{Code: coordwire.MalformedMessage, Reason: "preconditions.duplicate"}) {
			t.Errorf("%s: duplicate preconditions gave %v", name, err)
		}
	}
	tooMany := make([]coordwire.Precondition, coordwire.MaxPreconditions+1)
	for i := range tooMany {
		tooMany[i].Object = coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{byte(i + 1)}}
	}
	if _, err := digest.Operation(coordwire.CommandCancelRun, payload, tooMany, nil); !errors.Is(err, coordwire.MalformedMessage) {
		t.Errorf("65 preconditions gave %v", err)
	}
	if _, err := digest.Operation(coordwire.CommandCancelRun, make([]byte, coordwire.HardMaxTypedPayloadBytes+1), nil, nil); !errors.Is(err, coordwire.MalformedMessage) {
		t.Errorf("oversized payload gave %v", err)
	}
}

func TestOperationExtensions(t *testing.T) {
	payload := []byte("p")
	ext7 := coordwire.RawField{ID: 7, Raw: coordwire.AppendFieldBytes(nil, 7, []byte("x"))}
	ext9 := coordwire.RawField{ID: 9, Raw: coordwire.AppendFieldU16(nil, 9, 5)}
	// A varint-typed unknown field is a legal extension image too.
	ext200 := coordwire.RawField{ID: 200, Raw: append(coordwire.AppendUvarint(nil, 200), coordwire.WireVarint, 0x85, 0x01)}
	exts := []coordwire.RawField{ext7, ext9, ext200}
	got, err := digest.Operation(coordwire.CommandCreateObjective, payload, nil, exts)
	if err != nil {
		t.Fatal(err)
	}
	if want := refOperation(1, payload, nil, exts); got != want {
		t.Errorf("digest %x, reference %x", got, want)
	}
	plain, _ := digest.Operation(coordwire.CommandCreateObjective, payload, nil, nil)
	if plain == got {
		t.Error("extensions do not change the digest")
	}

	bad := map[string]struct {
		ext    []coordwire.RawField
		reason string
	}{
		"known id":         {[]coordwire.RawField{{ID: 6, Raw: coordwire.AppendFieldBytes(nil, 6, nil)}}, "extensions.known_id"},
		"out of order":     {[]coordwire.RawField{ext9, ext7}, "extensions.order"},
		"duplicate":        {[]coordwire.RawField{ext7, ext7}, "extensions.order"},
		"id mismatch":      {[]coordwire.RawField{{ID: 8, Raw: ext7.Raw}}, "extensions.image"},
		"two fields":       {[]coordwire.RawField{{ID: 7, Raw: append(bytes.Clone(ext7.Raw), ext9.Raw...)}}, "extensions.image"},
		"truncated":        {[]coordwire.RawField{{ID: 7, Raw: ext7.Raw[:len(ext7.Raw)-1]}}, "extensions.image"},
		"empty image":      {[]coordwire.RawField{{ID: 7}}, "extensions.image"},
		"nonminimal id":    {[]coordwire.RawField{{ID: 7, Raw: []byte{0x87, 0x00, 4, 0}}}, "extensions.image"},
		"nonminimal len":   {[]coordwire.RawField{{ID: 7, Raw: []byte{7, 4, 0x80, 0x00}}}, "extensions.image"},
		"unknown wiretype": {[]coordwire.RawField{{ID: 7, Raw: []byte{7, 9, 0}}}, "extensions.image"},
	}
	for name, c := range bad {
		_, err := digest.Operation(coordwire.CommandCreateObjective, payload, nil, c.ext)
		if !errors.Is(err, &coordwire.Error{Code: coordwire.MalformedMessage, Reason: c.reason}) {
			t.Errorf("%s: got %v, want MALFORMED_MESSAGE %s", name, err, c.reason)
		}
	}
}

func TestOperationDoesNotAllocate(t *testing.T) {
	payload := make([]byte, 500)
	pre := []coordwire.Precondition{
		{Object: coordwire.ObjectRef{Kind: 2, ID: [16]byte{2}}, ExpectedRevision: 1},
		{Object: coordwire.ObjectRef{Kind: 1, ID: [16]byte{1}}, ExpectedRevision: 1},
	}
	ext := []coordwire.RawField{{ID: 7, Raw: coordwire.AppendFieldBytes(nil, 7, []byte("x"))}}
	digest.Operation(coordwire.CommandStartRun, payload, pre, ext) // warm the pool
	if n := testing.AllocsPerRun(100, func() {
		digest.Operation(coordwire.CommandStartRun, payload, pre, ext)
	}); n != 0 {
		t.Errorf("Operation allocates %v times per call", n)
	}
}

func genRecord(t *rapid.T) coordwire.SnapshotRecord {
	return coordwire.SnapshotRecord{
		Object:        coordwire.ObjectRef{Kind: coordwire.ObjectKind(rapid.Uint16Range(1, 10).Draw(t, "kind")), ID: genID(t, "id")},
		Revision:      coordwire.ObjectRevision(rapid.Uint64Min(1).Draw(t, "rev")),
		SchemaVersion: rapid.Uint16().Draw(t, "schema"),
		Payload:       rapid.SliceOfN(rapid.Byte(), 0, 150).Draw(t, "payload"),
	}
}

func TestSnapshotMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		coord := coordwire.CoordinatorID(genID(t, "coord"))
		epoch := rapid.Uint64().Draw(t, "epoch")
		act := rapid.Uint64().Draw(t, "act")
		cut := rapid.Uint64().Draw(t, "cut")
		recs := rapid.SliceOfN(rapid.Custom(genRecord), 0, 20).Draw(t, "records")
		want := refSnapshot(coord, epoch, act, cut, recs)
		got := digest.Snapshot(coord, coordwire.AuthorityEpoch(epoch), coordwire.ActivationSequence(act), coordwire.EventCut(cut), recs)
		if got != want {
			t.Fatalf("Snapshot %x, reference %x", got, want)
		}
		// Incremental, mixing typed records and raw images.
		h := digest.NewSnapshotHasher(digest.SnapshotHeader{CoordinatorID: coord, Epoch: coordwire.AuthorityEpoch(epoch), ActivationSequence: coordwire.ActivationSequence(act), BaseEventCut: coordwire.EventCut(cut)}, uint64(len(recs)))
		for i := range recs {
			if i%2 == 0 {
				h.Add(&recs[i])
			} else {
				h.AddImage(recs[i].Append(nil))
			}
		}
		inc, err := h.Sum()
		if err != nil || inc != want {
			t.Fatalf("SnapshotHasher %x, %v; want %x", inc, err, want)
		}
		if _, err := h.Sum(); !errors.Is(err, digest.ErrFinished) {
			t.Fatalf("second Sum: %v", err)
		}
	})
}

func TestHasherCountMismatch(t *testing.T) {
	h := digest.NewSnapshotHasher(digest.SnapshotHeader{}, 2)
	h.Add(&coordwire.SnapshotRecord{})
	if _, err := h.Sum(); !errors.Is(err, digest.ErrRecordCount) {
		t.Errorf("snapshot: one record of two: %v", err)
	}
	r := digest.NewReplayHasher(digest.ReplayHeader{}, 0)
	r.Add(&coordwire.ReplayEvent{})
	if _, err := r.Sum(); !errors.Is(err, digest.ErrRecordCount) {
		t.Errorf("replay: one event of zero: %v", err)
	}
}

func genEvent(t *rapid.T) coordwire.ReplayEvent {
	return coordwire.ReplayEvent{
		EventSequence:  coordwire.EventSequence(rapid.Uint64Min(1).Draw(t, "seq")),
		EventID:        coordwire.EventID(genID(t, "eid")),
		EventKind:      coordwire.EventKind(rapid.Uint16Range(1, 14).Draw(t, "ekind")),
		Object:         coordwire.ObjectRef{Kind: coordwire.ObjectKind(rapid.Uint16Range(1, 10).Draw(t, "kind")), ID: genID(t, "id")},
		ObjectRevision: coordwire.ObjectRevision(rapid.Uint64Min(1).Draw(t, "rev")),
		Schema:         rapid.Uint16().Draw(t, "schema"),
		Payload:        rapid.SliceOfN(rapid.Byte(), 0, 150).Draw(t, "payload"),
	}
}

func TestReplayMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		coord := coordwire.CoordinatorID(genID(t, "coord"))
		sub := coordwire.SubscriptionID(genID(t, "sub"))
		epoch := rapid.Uint64().Draw(t, "epoch")
		act := rapid.Uint64().Draw(t, "act")
		after := rapid.Uint64().Draw(t, "after")
		cut := rapid.Uint64().Draw(t, "cut")
		evs := rapid.SliceOfN(rapid.Custom(genEvent), 0, 20).Draw(t, "events")
		want := refReplay(coord, epoch, act, sub, after, cut, evs)
		got := digest.Replay(coord, coordwire.AuthorityEpoch(epoch), coordwire.ActivationSequence(act), sub, coordwire.EventCut(after), coordwire.EventCut(cut), evs)
		if got != want {
			t.Fatalf("Replay %x, reference %x", got, want)
		}
		// The same events given page by page (empty pages included).
		split := rapid.IntRange(0, len(evs)).Draw(t, "split")
		paged := digest.Replay(coord, coordwire.AuthorityEpoch(epoch), coordwire.ActivationSequence(act), sub, coordwire.EventCut(after), coordwire.EventCut(cut), nil, evs[:split], nil, evs[split:])
		if paged != want {
			t.Fatalf("Replay of pages split at %d: %x, reference %x", split, paged, want)
		}
		h := digest.NewReplayHasher(digest.ReplayHeader{CoordinatorID: coord, Epoch: coordwire.AuthorityEpoch(epoch), ActivationSequence: coordwire.ActivationSequence(act), SubscriptionID: sub, AfterEventCut: coordwire.EventCut(after), ReplayCut: coordwire.EventCut(cut)}, uint64(len(evs)))
		for i := range evs {
			if i%2 == 1 {
				h.Add(&evs[i])
			} else {
				h.AddImage(evs[i].Append(nil))
			}
		}
		inc, err := h.Sum()
		if err != nil || inc != want {
			t.Fatalf("ReplayHasher %x, %v; want %x", inc, err, want)
		}
	})
}

func TestEffectAndEvidenceMatchReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kind := rapid.Uint8().Draw(t, "kind")
		target := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "target")
		payload := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "payload")
		if got, want := digest.Effect(coordwire.EffectKind(kind), target, payload), refEffect(kind, target, payload); got != want {
			t.Fatalf("Effect %x, reference %x", got, want)
		}
		binding := genID(t, "binding")
		facts := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 100), 0, 10).Draw(t, "facts")
		if got, want := digest.Evidence(coordwire.BindingID(binding), facts), refEvidence(binding, facts); got != want {
			t.Fatalf("Evidence %x, reference %x", got, want)
		}
	})
	// Moving a byte between target and payload changes the digest: the
	// lengths separate them.
	if digest.Effect(coordwire.EffectKill, []byte{1, 2}, []byte{3}) == digest.Effect(coordwire.EffectKill, []byte{1}, []byte{2, 3}) {
		t.Error("effect digest does not separate target from payload")
	}
}

func TestDomainStrings(t *testing.T) {
	for name, d := range map[string]string{
		"operation": digest.DomainOperation, "snapshot": digest.DomainSnapshot,
		"replay": digest.DomainReplay, "effect": digest.DomainEffect, "evidence": digest.DomainEvidence,
	} {
		want := append([]byte("phux-coordinator-"+name+"/v1"), 0)
		if !bytes.Equal([]byte(d), want) {
			t.Errorf("%s domain %q, want %q", name, d, want)
		}
	}
}

// TestPinned pins one digest of each kind to a constant, so that a change
// in both the package and the reference cannot go unnoticed.
func TestPinned(t *testing.T) {
	coord := coordwire.CoordinatorID{15: 1}
	for name, c := range map[string]struct {
		got  [32]byte
		want string
	}{
		"empty snapshot": {digest.Snapshot(coord, 1, 1, 0, nil), "460988e5c51166be6f9cd56ec86ec4deb2c9f55324a988027673f56980cf4f7e"},
		"cancel run":     {mustOp(t, coordwire.CommandCancelRun, append([]byte{1, 4, 16}, bytes.Repeat([]byte{0x11}, 16)...)), "148527126150117eccad6698b1eabb122185829a45bf6e08d22e4e09d304c52a"},
		"kill":           {digest.Effect(coordwire.EffectKill, []byte{1}, nil), "cec8ca40c4610f3744ec91e1e538aaaf8b6d3e66162fecf2cc75b4b94d825bc3"},
		"empty replay":   {digest.Replay(coord, 1, 1, coordwire.SubscriptionID(bytes.Repeat([]byte{0x22}, 16)), 5, 5, nil), "8141f137feab239e57629cb0af8c6bffc159e130ec84aa89dcb1ae5fff4d8d12"},
		"empty evidence": {digest.Evidence(coordwire.BindingID(bytes.Repeat([]byte{0x33}, 16)), nil), "46fe701eafa4529416869cdb2180ba5bd41b404dae86b29cadd33ae00e93a17a"},
	} {
		if got := hexs(c.got); got != c.want {
			t.Errorf("%s: %s, pinned %s", name, got, c.want)
		}
	}
}

func mustOp(t *testing.T, kind coordwire.CommandKind, payload []byte) [32]byte {
	t.Helper()
	d, err := digest.Operation(kind, payload, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func hexs(d [32]byte) string { return hex.EncodeToString(d[:]) }
