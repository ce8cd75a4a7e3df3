package coordwire

// Allocation properties (§3.1: bounded before allocation; reused values).
//
// TestHotPathAllocs asserts the allocation targets of the hot paths:
// encoding into a reused buffer makes 0 allocations, decoding COORD_EVENT
// into a reused value at most 1 (in fact 0).
//
// TestDecodeAllocationBound asserts that no decoder allocates more than a
// fixed multiple of the frame's declared length plus a constant, for valid
// frames of every type (built by randomising decoded samples) and for
// garbage and mutated bodies. The bound follows from the design:
//
//   - Variable-length fields (bytes, str, cursors, payloads) are copied,
//     each into one allocation of exactly its length, after the length was
//     checked against the bytes present. Go rounds an allocation up to its
//     size class, at most +50% plus 8 bytes for the tiniest sizes; each such
//     field costs at least 2 wire bytes of header (TLV id/wire/length, or a
//     u32 length prefix), so the copies cost at most 2 bytes per wire byte.
//   - Lists of nested values (records, events, preconditions) are
//     allocated once at the decoded count, which Count bounds by the bytes
//     present divided by the element's minimum image size; the Go element
//     is at most 2x its minimum image (SnapshotRecord: 64 bytes for >= 32
//     wire bytes; ReplayEvent 96 for >= 58; Precondition 32 for 26), so
//     lists cost at most 2 bytes per wire byte (+12.5% size-class rounding).
//   - Unknown fields kept verbatim ([]RawField: COORD_COMMAND extensions,
//     typed-payload unknown fields) cost a 32-byte RawField per field of at
//     least 3 wire bytes (TLVReader.Keep sizes the slice once for every
//     field left in the body instead of growing it geometrically), plus the
//     copy of the field's bytes (at most 16 bytes for a 3-byte field):
//     at most 16 bytes per wire byte.
//   - Everything else is constant per decode: the frame struct, fixed-size
//     nested structs, a refusal's *Error, and one small escape per known
//     nested field read through TLVReader.Nested (known fields occur at
//     most once each).
//
// Hence allocated <= rawFieldFactor x L + constBytes for frames that keep
// raw fields (COORD_COMMAND, which also decodes its typed payload once),
// and <= byteFactor x L + constBytes for every other frame, where L is the
// declared length.

import (
	"bytes"
	"maps"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

const (
	// byteFactor bounds the allocation per declared byte of frames
	// without kept raw fields: copies (2) + lists (2 x 1.125), rounded up.
	byteFactor = 5
	// rawFieldFactor bounds it for frames that keep unknown fields as
	// []RawField (COORD_COMMAND): (32 + 16) bytes per >= 3 wire bytes.
	rawFieldFactor = 16
	// constBytes bounds the per-decode constant: the frame struct (the
	// largest, COORD_HELLO_OK with its certificate, is under 400 bytes),
	// nested escapes, a typed-payload struct and one refusal.
	constBytes = 4096
)

// TestHotPathAllocs checks the allocation targets with
// testing.AllocsPerRun (counts).
func TestHotPathAllocs(t *testing.T) {
	if faRace {
		// The race detector makes sync.Pool drop items at random, and
		// COORD_COMMAND validates its payload in a pooled value.
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	ev := sampleCoordEvent(200)
	cmd := sampleCommandStartRun()
	page := sampleSnapshotPage(benchSnapshotRecords, benchSnapshotPayload)

	for _, f := range []Frame{ev, cmd, page} {
		buf := AppendFrame(nil, f)
		if n := testing.AllocsPerRun(100, func() { buf = AppendFrame(buf[:0], f) }); n != 0 {
			t.Errorf("encode %v into a reused buffer: %v allocs, want 0", f.Type(), n)
		}
	}
	body := ev.AppendBody(nil)
	var got CoordEvent
	if n := testing.AllocsPerRun(100, func() {
		if err := got.DecodeBody(body); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("decode COORD_EVENT into a reused value: %v allocs, want <= 1", n)
	}
	// Reused decodes of the other benchmarked frames settle at 0 once the
	// value's storage has grown.
	for _, f := range []Frame{cmd, page} {
		body := f.AppendBody(nil)
		into := NewFrame(f.Type())
		if n := testing.AllocsPerRun(20, func() {
			if err := into.DecodeBody(body); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("decode %v into a reused value: %v allocs, want 0", f.Type(), n)
		}
	}
	// The writer and the stream reader's receive loop.
	fw := NewFrameWriter(discard{})
	if n := testing.AllocsPerRun(100, func() { _ = fw.WriteFrame(ev) }); n != 0 {
		t.Errorf("FrameWriter.WriteFrame: %v allocs, want 0", n)
	}
	fr := NewFrameReader(&loopReader{data: eventStream()}, RoleClient)
	fr.Activate(ReferenceLimits())
	if n := testing.AllocsPerRun(100, func() {
		typ, b, err := fr.ReadRaw()
		if err == nil {
			err = fr.DecodeInto(typ, b, &got) // under the negotiated caps
		}
		if err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("FrameReader.ReadRaw + DecodeInto: %v allocs, want 0", n)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// allocatedBytes returns the bytes allocated per call of f, averaged over
// runs, with the collector off so that TotalAlloc counts every allocation.
func allocatedBytes(runs int, f func()) uint64 {
	f() // warm up: one-time initialisation (sync.Once tables) is not the decoder's
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// allocBound returns the largest allocation the bound allows for a frame
// of type t with declared length l.
func allocBound(t FrameType, l int) uint64 {
	factor := uint64(byteFactor)
	if t == TypeCoordCommand {
		factor = rawFieldFactor
	}
	return factor*uint64(l) + constBytes
}

// validSamples returns decoded valid frames of every type available: the
// built-in samples and every valid frame vector.
func validSamples(tb testing.TB) []Frame {
	out := sampleFrames()
	for _, v := range loadVectorSeeds(tb).Frames {
		if !v.Valid || len(v.Wire) < 5 {
			continue
		}
		if f, err := DecodeFrame(FrameType(v.Wire[4]), v.Wire[5:]); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// TestDecodeAllocationBound checks, with rapid, that DecodeFrame and
// Receiver.DecodeMessage allocate at most allocBound bytes for random
// valid frames of every type, random garbage bodies and mutated bodies.
// Each rapid case covers every frame type that has a sample.
func TestDecodeAllocationBound(t *testing.T) {
	byType := map[FrameType][]Frame{}
	for _, f := range validSamples(t) {
		byType[f.Type()] = append(byType[f.Type()], f)
	}
	types := slices.Sorted(maps.Keys(byType))
	validCount := map[FrameType]int{}
	var worst struct {
		ratio float64
		t     FrameType
		l     int
		got   uint64
	}
	rapid.Check(t, func(rt *rapid.T) {
		for _, ft := range types {
			samples := byType[ft]
			sample := samples[rapid.IntRange(0, len(samples)-1).Draw(rt, "sample")]
			var body []byte
			switch rapid.IntRange(0, 3).Draw(rt, "mode") {
			case 0, 1: // a randomised valid-shaped frame of the sample's type
				f := NewFrame(ft)
				if err := f.DecodeBody(sample.AppendBody(nil)); err != nil {
					rt.Fatalf("sample %v does not decode: %v", ft, err)
				}
				randomize(rt, reflect.ValueOf(f).Elem(), "f")
				body = f.AppendBody(nil)
			case 2: // garbage
				body = rapid.SliceOfN(rapid.Byte(), 0, 4096).Draw(rt, "garbage")
			case 3: // a sample with some bytes changed
				body = sample.AppendBody(nil)
				for range rapid.IntRange(1, 8).Draw(rt, "flips") {
					if len(body) == 0 {
						break
					}
					i := rapid.IntRange(0, len(body)-1).Draw(rt, "at")
					body[i] = rapid.Byte().Draw(rt, "to")
				}
			}
			l := len(body) + 1
			if l > HardMaxFrameBytes {
				continue
			}
			var decodeErr error
			got := allocatedBytes(2, func() { _, decodeErr = DecodeFrame(ft, body) })
			if decodeErr == nil {
				validCount[ft]++
			}
			if bound := allocBound(ft, l); got > bound {
				rt.Fatalf("DecodeFrame(%v) of declared length %d allocated %d bytes > bound %d (err %v)", ft, l, got, bound, decodeErr)
			}
			if r := float64(got) / float64(l); r > worst.ratio && l > 64 {
				worst.ratio, worst.t, worst.l, worst.got = r, ft, l, got
			}

			msg := append(AppendU32(nil, uint32(l)), byte(ft))
			msg = append(msg, body...)
			rc := Receiver{Role: RoleServer, State: StateActive, Limits: HardLimits()}
			if !ft.SentBy(RoleClient) {
				rc.Role = RoleClient
			}
			if !ft.LegalIn(StateActive) {
				rc.State = StateHandshake
			}
			got = allocatedBytes(2, func() { _, _ = rc.DecodeMessage(msg) })
			if bound := allocBound(ft, l); got > bound {
				rt.Fatalf("DecodeMessage(%v) of declared length %d allocated %d bytes > bound %d", ft, l, got, bound)
			}
		}
	})
	var never []FrameType
	for _, ft := range types {
		if validCount[ft] == 0 {
			never = append(never, ft)
		}
	}
	t.Logf("frame types with samples: %d; worst bytes per declared byte (L > 64): %.2f (%v, L=%d, %d bytes); types never decoded valid after randomising: %v",
		len(types), worst.ratio, worst.t, worst.l, worst.got, never)
}

// TestDecodeAllocationWorstCases checks the bound on constructed worst
// cases: a SNAPSHOT_PAGE of minimal records, COORD_COMMAND with many
// minimal extensions, and a COORD_EVENT declaring a large payload.
func TestDecodeAllocationWorstCases(t *testing.T) {
	if faRace {
		t.Skip("the race detector adds its own allocations; the bound is measured without it")
	}
	// Minimal records: empty payloads, as many as the hard cap allows.
	page := sampleSnapshotPage(HardMaxPageRecords, 0)
	// Minimal extensions: id || WireBytes || 0, three bytes each.
	cmd := sampleCommandStartRun()
	for id := uint64(7); id < 7+4000; id++ {
		cmd.Extensions = append(cmd.Extensions, RawField{ID: id, Raw: AppendFieldHeader(nil, id, 0)})
	}
	// Minimal unknown fields inside the typed payload (kept for the digest).
	cmdPayload := sampleCommandStartRun()
	var sr StartRun
	if err := sr.DecodeTLV(cmdPayload.Payload); err != nil {
		t.Fatal(err)
	}
	for id := uint64(10); id < 10+4000; id++ {
		sr.Unknown = append(sr.Unknown, RawField{ID: id, Raw: AppendFieldHeader(nil, id, 0)})
	}
	cmdPayload.Payload = sr.AppendTLV(nil)
	for _, f := range []Frame{page, cmd, cmdPayload, sampleCoordEvent(200_000)} {
		body := f.AppendBody(nil)
		l := len(body) + 1
		var err error
		got := allocatedBytes(2, func() { _, err = DecodeFrame(f.Type(), body) })
		if err != nil {
			t.Fatalf("%v: %v", f.Type(), err)
		}
		t.Logf("%v: declared %d bytes, decode allocated %d (%.2f per byte)", f.Type(), l, got, float64(got)/float64(l))
		if bound := allocBound(f.Type(), l); got > bound {
			t.Errorf("%v: allocated %d bytes > bound %d", f.Type(), got, bound)
		}
	}
}

// randomize overwrites the variable parts of a decoded frame value with
// random data drawn from rt, keeping it close to valid: fixed byte arrays
// get random nonzero contents, byte slices random lengths (an absent
// optional may stay absent), lists random lengths (elements copied from
// the sample, then randomised, then sorted where the spec orders them).
// Scalars are left as decoded, so enums stay valid.
func randomize(rt *rapid.T, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 && rapid.Bool().Draw(rt, path+".rnd") {
			b := rapid.SliceOfN(rapid.Byte(), v.Len(), v.Len()).Draw(rt, path)
			b[len(b)-1] |= 1
			reflect.Copy(v, reflect.ValueOf(b))
		}
	case reflect.String:
		if rapid.Bool().Draw(rt, path+".rnd") {
			v.SetString(rapid.StringN(0, 40, 64).Draw(rt, path))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				randomize(rt, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.Slice:
		switch {
		case v.Type().Elem().Kind() == reflect.Uint8:
			if v.IsNil() && rapid.Bool().Draw(rt, path+".absent") {
				return
			}
			n := rapid.SampledFrom([]int{0, 1, 2, 17, 200, 1500}).Draw(rt, path+".len")
			if v.IsNil() || len(v.Bytes()) > 0 {
				n = max(n, 1) // present optional bytes are nonempty
			}
			v.SetBytes(rapid.SliceOfN(rapid.Byte(), n, n).Draw(rt, path))
		case v.Type() == reflect.TypeOf([]RawField(nil)):
			// Extensions: ascending ids above any existing one.
			next := uint64(7)
			if v.Len() > 0 {
				next = v.Index(v.Len()-1).Interface().(RawField).ID + 1
			}
			var out []RawField
			for i := range rapid.IntRange(0, 40).Draw(rt, path+".n") {
				id := next + uint64(i)
				out = append(out, RawField{ID: id, Raw: AppendFieldBytes(nil, id, rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(rt, path+".raw"))})
			}
			v.Set(reflect.ValueOf(out))
		case v.Len() > 0:
			n := rapid.SampledFrom([]int{0, 1, 3, 64, 300}).Draw(rt, path+".n")
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				s.Index(i).Set(v.Index(i % v.Len()))
				// Deep-copy byte slices so randomising one element
				// does not change another.
				randomize(rt, s.Index(i), path+"[]")
			}
			sortElements(s)
			v.Set(s)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			randomize(rt, v.Elem(), path)
		}
	}
}

// sortElements sorts a list the way the spec orders it: by Object
// (snapshot records, preconditions) or by EventSequence (replay events),
// removing duplicates; other lists are left as they are.
func sortElements(s reflect.Value) {
	et := s.Type().Elem()
	if et.Kind() != reflect.Struct {
		return
	}
	if _, ok := et.FieldByName("Object"); ok && et.Field(0).Type == reflect.TypeOf(ObjectRef{}) {
		items := make([]reflect.Value, s.Len())
		for i := range items {
			items[i] = reflect.ValueOf(s.Index(i).Interface())
		}
		slices.SortStableFunc(items, func(a, b reflect.Value) int {
			return a.Field(0).Interface().(ObjectRef).Compare(b.Field(0).Interface().(ObjectRef))
		})
		for i := range items {
			s.Index(i).Set(items[i])
		}
		return
	}
	if f, ok := et.FieldByName("EventSequence"); ok && f.Type.Kind() == reflect.Uint64 {
		for i := range s.Len() {
			s.Index(i).FieldByIndex(f.Index).SetUint(uint64(i + 1))
		}
	}
}

// TestCoordEventFastPathProperty checks with rapid that the COORD_EVENT
// fast encoder and decoder agree with the field-by-field ones on random
// events, including invalid values (which the fast decoder must decline).
func TestCoordEventFastPathProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ev := sampleCoordEvent(0)
		randomize(rt, reflect.ValueOf(ev).Elem(), "ev")
		ev.DeliverySequence = DeliverySequence(rapid.SampledFrom([]uint64{0, 1, 1 << 63}).Draw(rt, "deliv"))
		ev.EventKind = EventKind(rapid.Uint16Range(0, 20).Draw(rt, "kind"))
		ev.Object.Kind = ObjectKind(rapid.Uint16Range(0, 12).Draw(rt, "okind"))
		ev.ObjectRevision = ObjectRevision(rapid.Uint64Range(0, 3).Draw(rt, "rev"))
		if rapid.Bool().Draw(rt, "zeroSub") {
			ev.SubscriptionID = SubscriptionID{}
		}
		body := ev.AppendBody(nil)
		if !bytes.Equal(body, ev.appendBodyFields(nil)) {
			rt.Fatalf("fast encoder differs from the field encoder")
		}
		if rapid.Bool().Draw(rt, "trailing") {
			body = append(body, 10, WireBytes, 0)
		}
		checkCoordEventPaths(t, body)
	})
}

// A page decoded into a fresh value carves its payloads from one
// allocation sized exactly (so the allocation count does not grow with
// the records, and nothing is over-allocated), and each payload is
// capped: appending to one never overwrites the next.
func TestSnapshotPagePayloadArena(t *testing.T) {
	if faRace {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	allocs := func(n int) float64 {
		body := sampleSnapshotPage(n, 40).AppendBody(nil)
		return testing.AllocsPerRun(20, func() {
			var m SnapshotPage
			if err := m.DecodeBody(body); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a, b := allocs(8), allocs(512); a != b {
		t.Fatalf("fresh decode: %v allocations for 8 records, %v for 512: payloads are allocated per record", a, b)
	}
	body := sampleSnapshotPage(3, 40).AppendBody(nil)
	var m SnapshotPage
	if err := m.DecodeBody(body); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range m.Records {
		if cap(r.Payload) != len(r.Payload) {
			t.Fatalf("payload of %d bytes has capacity %d", len(r.Payload), cap(r.Payload))
		}
		total += len(r.Payload)
	}
	if end := &m.Records[2].Payload[39]; uintptr(unsafe.Pointer(end))-uintptr(unsafe.Pointer(&m.Records[0].Payload[0])) != uintptr(total-1) {
		t.Fatal("payloads are not carved from one exact allocation")
	}
	next := append([]byte(nil), m.Records[1].Payload...)
	m.Records[0].Payload = append(m.Records[0].Payload, 0xee)
	if string(m.Records[1].Payload) != string(next) {
		t.Fatal("appending to one payload overwrote the next")
	}
}

// TestEncodersGrowOnce: the encoders on a durable command's path — a
// TLV bytes field, a length-prefixed value, an ObjectRef, a SnapshotRecord
// (each event's payload), the OBJECTIVE record and the objective command
// payloads — appended to an empty buffer allocate it once, not once per
// field.
func TestEncodersGrowOnce(t *testing.T) {
	if faRace {
		t.Skip("allocation counts under the race detector")
	}
	doc := bytes.Repeat([]byte{'d'}, 200)
	oid := ObjectiveID{1, 2, 3}
	ref := ObjectRef{Kind: ObjectKindObjective, ID: oid}
	rec := ObjectiveRecord{DocumentSchema: 1, Document: doc, State: ObjectiveActive}
	snap := SnapshotRecord{Object: ref, Revision: 3, SchemaVersion: RecordSchemaVersion, Payload: rec.AppendTLV(nil)}
	for name, enc := range map[string]func() []byte{
		"AppendFieldBytes":          func() []byte { return AppendFieldBytes(nil, 300, doc) },
		"AppendLenPrefixed":         func() []byte { return AppendLenPrefixed(nil, doc) },
		"ObjectRef.Append":          func() []byte { return ref.Append(nil) },
		"SnapshotRecord.Append":     func() []byte { return snap.Append(nil) },
		"ObjectiveRecord.AppendTLV": func() []byte { return rec.AppendTLV(nil) },
		"CreateObjective.AppendTLV": func() []byte {
			return (&CreateObjective{ObjectiveID: oid, Schema: 1, Document: doc}).AppendTLV(nil)
		},
		"UpdateObjective.AppendTLV": func() []byte {
			return (&UpdateObjective{ObjectiveID: oid, Schema: 1, Document: doc}).AppendTLV(nil)
		},
	} {
		var out []byte
		if n := testing.AllocsPerRun(50, func() { out = enc() }); n != 1 {
			t.Errorf("%s into an empty buffer: %v allocations, want 1", name, n)
		}
		// The room reserved is what the image takes, give or take the
		// size class: never a second growth's worth.
		if cap(out) > 2*len(out)+16 {
			t.Errorf("%s: %d bytes in a buffer of %d", name, len(out), cap(out))
		}
	}
}
