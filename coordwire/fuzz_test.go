package coordwire

// Fuzz targets (go test -fuzz=FuzzXxx ./coordwire). Each is seeded from the
// conformance vectors (../vectors/*.json, read generically so that this
// package does not import the vectors package, which imports it) and from
// built-in deterministic samples, so the seed corpus runs as part of the
// normal `go test`. Crashers found by fuzzing are kept under
// testdata/fuzz/<Target>/.
//
// The properties checked on every input:
//   - no decoder panics;
//   - every refusal is an *Error whose Code is one of §13's codes;
//   - a decoder that accepts its input is canonical: re-encoding the decoded
//     value gives back the input exactly, except for the fields the spec lets
//     a decoder drop (unknown top-level fields of frames and snapshot-record
//     payloads, which are skipped, not kept) and the one accepted
//     non-canonical form, COORD_COMMAND with present-empty preconditions
//     (equivalent to absent, §8);
//   - decoding into a value that already holds another decoded value gives
//     the same result as decoding into a fresh value (storage reuse never
//     leaks old content).

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// ---------------------------------------------------------------------------
// Seeds from the conformance vectors.

// vectorFrame is one frame case of a vector file, read generically.
type vectorFrame struct {
	Name  string
	Valid bool
	Wire  []byte
	State ConnState // 0 when the vector does not say
	Role  Role      // receiving role; 0 = either
}

// vectorSeeds is everything the fuzz targets take from ../vectors/*.json.
type vectorSeeds struct {
	Frames   []vectorFrame
	Commands []kindBytes // operation-digest cases: command kind, payload
	Records  []kindBytes // snapshot-digest records: object kind, payload
	Certs    [][]byte    // activation certificate images
}

type kindBytes struct {
	Kind uint16
	B    []byte
}

var (
	vectorsOnce sync.Once
	vectorsData vectorSeeds
)

// loadVectorSeeds parses ../vectors/*.json with encoding/json into generic
// maps (field names as in ADDENDUM C.11, bytes in base64). Missing files
// give no seeds; a file that does not parse fails the test.
func loadVectorSeeds(tb testing.TB) *vectorSeeds {
	tb.Helper()
	var loadErr error
	vectorsOnce.Do(func() {
		files, _ := filepath.Glob(filepath.Join("..", "vectors", "*.json"))
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				loadErr = err
				return
			}
			var doc struct {
				Vectors []map[string]json.RawMessage `json:"vectors"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				loadErr = err
				return
			}
			for _, v := range doc.Vectors {
				addVectorSeed(&vectorsData, v)
			}
		}
	})
	if loadErr != nil {
		tb.Fatalf("reading vector seeds: %v", loadErr)
	}
	return &vectorsData
}

func addVectorSeed(s *vectorSeeds, v map[string]json.RawMessage) {
	var name string
	var valid bool
	_ = json.Unmarshal(v["name"], &name)
	_ = json.Unmarshal(v["valid"], &valid)
	if raw, ok := v["frame"]; ok {
		var f struct {
			Wire     string `json:"wire"`
			State    string `json:"state"`
			Receiver string `json:"receiver"`
		}
		if json.Unmarshal(raw, &f) == nil {
			wire, _ := base64.StdEncoding.DecodeString(f.Wire)
			vf := vectorFrame{Name: name, Valid: valid, Wire: wire}
			switch f.State {
			case "HANDSHAKE":
				vf.State = StateHandshake
			case "ACTIVE":
				vf.State = StateActive
			}
			switch f.Receiver {
			case "SERVER":
				vf.Role = RoleServer
			case "CLIENT":
				vf.Role = RoleClient
			}
			s.Frames = append(s.Frames, vf)
		}
	}
	if raw, ok := v["operation_digest"]; ok {
		var c struct {
			Kind    uint16 `json:"command_kind"`
			Payload string `json:"payload"`
		}
		if json.Unmarshal(raw, &c) == nil {
			p, _ := base64.StdEncoding.DecodeString(c.Payload)
			s.Commands = append(s.Commands, kindBytes{c.Kind, p})
		}
	}
	if raw, ok := v["snapshot_digest"]; ok {
		var c struct {
			Records []struct {
				Kind    uint16 `json:"object_kind"`
				Payload string `json:"payload"`
			} `json:"records"`
		}
		if json.Unmarshal(raw, &c) == nil {
			for _, r := range c.Records {
				p, _ := base64.StdEncoding.DecodeString(r.Payload)
				s.Records = append(s.Records, kindBytes{r.Kind, p})
			}
		}
	}
	if raw, ok := v["certificate"]; ok {
		var c struct {
			Certificate string `json:"certificate"`
		}
		if json.Unmarshal(raw, &c) == nil {
			p, _ := base64.StdEncoding.DecodeString(c.Certificate)
			s.Certs = append(s.Certs, p)
		}
	}
}

// sampleFrames returns built-in deterministic frames (valid, canonical),
// used as seeds whether or not the vectors exist.
func sampleFrames() []Frame {
	id := func(b byte) (v [16]byte) {
		for i := range v {
			v[i] = b + byte(i)
		}
		return v
	}
	guard := AuthorityGuard{CoordinatorID: id(1), AuthorityEpoch: 3, ActivationSequence: 4, FencingTokenSHA256: [32]byte{9, 9}}
	return []Frame{
		sampleCoordEvent(200),
		&Ack{RequestID: 7},
		&CoordPing{Nonce: 1 << 40},
		&CoordPong{Nonce: 5},
		&CoordError{RequestID: 2, Code: NotFound, Message: "no such run"},
		&CoordError{Code: Internal},
		&Credit{SubscriptionID: id(5), AddCount: 10, AddBytes: 1 << 20},
		&CoordHello{ProtocolMinor: 1, ClientName: "fuzz", Limits: ReferenceLimits(), WorkloadOffer: WorkloadOffer{ClientNonce: [32]byte{1}}},
		sampleCommandStartRun(),
		&CoordCommand{RequestID: 1, Guard: guard, OperationID: id(9), Kind: CommandCancelRun,
			Payload:       (&CancelRun{RunID: id(10)}).AppendTLV(nil),
			Preconditions: []Precondition{{Object: ObjectRef{Kind: ObjectKindRun, ID: id(10)}, ExpectedRevision: 2}},
			Extensions:    []RawField{{ID: 9, Raw: []byte{9, WireBytes, 1, 0xee}}}},
		sampleSnapshotPage(3, 40),
	}
}

// sampleCoordEvent returns a canonical COORD_EVENT with an n-byte payload.
func sampleCoordEvent(n int) *CoordEvent {
	var sub, eid, oid [16]byte
	for i := range sub {
		sub[i], eid[i], oid[i] = byte(0x10+i), byte(0x40+i), byte(0x80+i)
	}
	return &CoordEvent{
		SubscriptionID:   sub,
		DeliverySequence: 123456,
		EventSequence:    9876543,
		EventID:          eid,
		EventKind:        EventRunChanged,
		Object:           ObjectRef{Kind: ObjectKindRun, ID: oid},
		ObjectRevision:   42,
		Schema:           1,
		Payload:          bytes.Repeat([]byte{0xab}, n),
	}
}

// sampleCommandStartRun returns a COORD_COMMAND carrying a START_RUN
// payload with a 256-byte executor document and two preconditions.
func sampleCommandStartRun() *CoordCommand {
	id := func(b byte) (v [16]byte) {
		for i := range v {
			v[i] = b ^ byte(i*7+1)
		}
		return v
	}
	sr := &StartRun{
		ObjectiveID:               id(1),
		RunID:                     id(2),
		WorkSessionID:             id(3),
		ExecutorSchema:            1,
		ExecutorDocument:          bytes.Repeat([]byte("x"), 256),
		PendingBindingID:          id(4),
		OwnerAuthorityFingerprint: [32]byte{5, 5, 5},
		OwnerIncarnation:          id(6),
		TerminalGroup:             []byte("build"),
	}
	return &CoordCommand{
		RequestID:   17,
		Guard:       AuthorityGuard{CoordinatorID: id(7), AuthorityEpoch: 2, ActivationSequence: 5, FencingTokenSHA256: [32]byte{1, 2, 3}},
		OperationID: id(8),
		Kind:        CommandStartRun,
		Payload:     sr.AppendTLV(nil),
		Preconditions: []Precondition{
			{Object: ObjectRef{Kind: ObjectKindObjective, ID: id(1)}, ExpectedRevision: 4},
			{Object: ObjectRef{Kind: ObjectKindRun, ID: id(2)}, ExpectedRevision: 0},
		},
	}
}

// sampleSnapshotPage returns a SNAPSHOT_PAGE with n ADMIN-free records of
// payloadSize opaque payload bytes each (records are opaque at this level).
func sampleSnapshotPage(n, payloadSize int) *SnapshotPage {
	p := &SnapshotPage{RequestID: 3, SnapshotID: SnapshotID{1, 2, 3}, Cursor: []byte("c0"), PageIndex: 1, NextCursor: []byte("c1")}
	for i := range n {
		var id [16]byte
		binary.BigEndian.PutUint64(id[8:], uint64(i+1))
		p.Records = append(p.Records, SnapshotRecord{
			Object:        ObjectRef{Kind: ObjectKindRun, ID: id},
			Revision:      ObjectRevision(i + 1),
			SchemaVersion: RecordSchemaVersion,
			Payload:       bytes.Repeat([]byte{byte(i)}, payloadSize),
		})
	}
	return p
}

// frameSeeds returns (type, body) pairs: every vector frame and every
// built-in sample.
func frameSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, v := range loadVectorSeeds(tb).Frames {
		if len(v.Wire) >= 5 {
			out = append(out, v.Wire[4:])
		}
	}
	for _, f := range sampleFrames() {
		out = append(out, AppendFrame(nil, f)[4:])
	}
	return out
}

// ---------------------------------------------------------------------------
// Shared checks.

// checkRefusal fails unless err is an *Error with a defined code.
func checkRefusal(t *testing.T, what string, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: refusal %v (%T) is not a *coordwire.Error", what, err, err)
	}
	if !e.Code.Valid() || e.Reason == "" {
		t.Fatalf("%s: refusal with invalid code or empty reason: %#v", what, e)
	}
}

// fieldIDs returns the ids of the top-level fields of a well-formed body.
func splitFields(body []byte) (ids []uint64, raws [][]byte) {
	d := NewTLVReader(body)
	for d.Next() {
		ids = append(ids, d.FieldID())
		raws = append(raws, d.RawField())
	}
	return ids, raws
}

// keepFields returns body without the top-level fields for which keep
// reports false.
func keepFields(body []byte, keep func(id uint64) bool) []byte {
	var out []byte
	ids, raws := splitFields(body)
	for i, id := range ids {
		if keep(id) {
			out = append(out, raws[i]...)
		}
	}
	return out
}

// knownIDs probes a TLV decoder for the field ids it knows: a known field
// must use wire type BYTES, so a body holding only field id with wire type
// VARINT is refused as "tlv.wrong_wire_type" exactly when id is known
// (unknown fields are skipped whatever their wire type).
func knownIDs(decode func([]byte) error) (known [128]bool) {
	for id := 1; id < 128; id++ {
		err := decode([]byte{byte(id), WireVarint, 0})
		var e *Error
		known[id] = errors.As(err, &e) && e.Reason == "tlv.wrong_wire_type"
	}
	return known
}

var (
	frameKnownOnce sync.Once
	frameKnown     [256][128]bool
)

// frameKeeps reports whether a top-level field id of frame type t survives
// decode and re-encode: a known field, or a COORD_COMMAND envelope
// extension (id >= 7), which is kept verbatim for the digest.
func frameKeeps(t FrameType, id uint64) bool {
	frameKnownOnce.Do(func() {
		for _, ft := range FrameTypes() {
			frameKnown[ft] = knownIDs(func(b []byte) error { return NewFrame(ft).DecodeBody(b) })
		}
	})
	if t == TypeCoordCommand && id >= 7 {
		return true
	}
	return id < 128 && frameKnown[t][id]
}

// checkFrameCanonical checks the canonical round trip of a decoded frame f
// against its body.
func checkFrameCanonical(t *testing.T, f Frame, body []byte) {
	t.Helper()
	ft := f.Type()
	want := keepFields(body, func(id uint64) bool { return frameKeeps(ft, id) })
	if c, ok := f.(*CoordCommand); ok && len(c.Preconditions) == 0 {
		// Present-empty preconditions: the one accepted non-canonical
		// form, equivalent to absent (§8); the encoder omits field 6.
		want = keepFields(want, func(id uint64) bool { return id != 6 })
	}
	got := f.AppendBody(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("%v: decode accepted a body that does not re-encode to itself (minus dropped unknown fields)\n in  %x\n want %x\n got  %x", ft, body, want, got)
	}
	// Decoding into a value that holds an earlier, different decoded value
	// must give the same value.
	for _, seed := range reuseSeeds(ft) {
		g := NewFrame(ft)
		if g.DecodeBody(seed) != nil {
			continue
		}
		if err := g.DecodeBody(body); err != nil {
			t.Fatalf("%v: decode into a reused value refused what a fresh value accepted: %v", ft, err)
		}
		if again := g.AppendBody(nil); !bytes.Equal(again, got) {
			t.Fatalf("%v: decode into a reused value differs from a fresh decode\n fresh %x\n reuse %x", ft, got, again)
		}
	}
}

var (
	reuseOnce  sync.Once
	reuseBySeq map[FrameType][][]byte
)

// reuseSeeds returns valid bodies of type t (built-in samples), decoded into
// a value before the value is reused.
func reuseSeeds(t FrameType) [][]byte {
	reuseOnce.Do(func() {
		reuseBySeq = map[FrameType][][]byte{}
		for _, f := range sampleFrames() {
			reuseBySeq[f.Type()] = append(reuseBySeq[f.Type()], f.AppendBody(nil))
		}
	})
	return reuseBySeq[t]
}

// checkCoordEventPaths checks that the COORD_EVENT fast path and the
// general decoder agree on body: both accept it with the same value, or the
// fast path declines it.
func checkCoordEventPaths(t *testing.T, body []byte) {
	t.Helper()
	var fast, slow CoordEvent
	fastOK := fast.decodeCanonical(body)
	slowErr := slow.decodeFields(body)
	if fastOK {
		if slowErr != nil {
			t.Fatalf("COORD_EVENT fast path accepted a body the general decoder refuses (%v): %x", slowErr, body)
		}
		if diff := cmp.Diff(&slow, &fast, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("COORD_EVENT fast path and general decoder differ (-general +fast):\n%s", diff)
		}
	}
	if slowErr == nil {
		if !bytes.Equal(slow.AppendBody(nil), slow.appendBodyFields(nil)) {
			t.Fatalf("COORD_EVENT fast encoder differs from the field encoder for %x", body)
		}
	}
}

// ---------------------------------------------------------------------------
// FuzzEnvelope: the stream reader.

// FuzzEnvelope runs a FrameReader over arbitrary stream bytes, for both
// roles and both states. It must never panic; it must never reserve a body
// buffer larger than the largest declared length it accepted; every
// refusal is an *Error with a valid code, or io.EOF / io.ErrUnexpectedEOF
// for a stream that ends; every frame it returns is canonical.
func FuzzEnvelope(f *testing.F) {
	for _, v := range loadVectorSeeds(f).Frames {
		role, state := v.Role, v.State
		if role == 0 {
			role = RoleServer
		}
		if state == 0 {
			state = StateActive
		}
		f.Add(v.Wire, uint8(role), uint8(state))
	}
	var stream []byte
	for _, fr := range sampleFrames() {
		stream = AppendFrame(stream, fr)
	}
	for r := RoleServer; r <= RoleClient; r++ {
		for st := StateHandshake; st <= StateActive; st++ {
			f.Add(stream, uint8(r), uint8(st))
		}
	}
	f.Add([]byte{0, 0, 0, 0}, uint8(RoleServer), uint8(StateHandshake))
	f.Add([]byte{0, 0x10, 0, 1, 0xb0}, uint8(RoleClient), uint8(StateActive))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xb0}, uint8(RoleClient), uint8(StateActive))
	f.Fuzz(func(t *testing.T, data []byte, role, state uint8) {
		// Reads of at most 7 bytes, then reads as large as the reader
		// asks: the read-ahead across short reads and across whole
		// chunks that hold several frames.
		for _, chunk := range []int{7, 0} {
			fuzzEnvelopeStream(t, &peekReader{data: data, chunk: chunk}, role, state)
		}
	})
}

func fuzzEnvelopeStream(t *testing.T, src *peekReader, role, state uint8) {
	recv := Role(role%2 + 1)
	sender := RoleClient
	if recv == RoleClient {
		sender = RoleServer
	}
	fr := NewFrameReader(src, recv)
	if state%2 == 1 {
		fr.Activate(ReferenceLimits())
	}
	maxBody := 0 // largest body (declared length - 1) accepted so far
	// The next frame starts at pos: the reader reads ahead, so
	// src.off may be past it.
	pos := 0
	for range 64 {
		declared := -1
		rest := src.data[pos:]
		if len(rest) >= 4 {
			declared = int(binary.BigEndian.Uint32(rest))
		}
		frame, err := fr.ReadFrame()
		headerPassed := err == nil || errors.Is(err, io.ErrUnexpectedEOF) && len(rest) >= 5
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			checkRefusal(t, "FrameReader", err)
			var e *Error
			headerPassed = errors.As(err, &e) && !strings.HasPrefix(e.Reason, "envelope.")
		}
		// The body buffer is reserved only after the header checks
		// passed, and only for the declared length.
		if headerPassed {
			maxBody = max(maxBody, declared-1)
		}
		if fr.retained() > maxBody {
			t.Fatalf("reader reserved %d bytes; largest declared body it accepted is %d", fr.retained(), maxBody)
		}
		if err != nil {
			return
		}
		pos += 4 + declared
		if uint32(declared) > fr.FrameCap(frame.Type()) {
			t.Fatalf("reader accepted declared length %d over the cap %d", declared, fr.FrameCap(frame.Type()))
		}
		if !frame.Type().LegalFrom(sender, fr.State) {
			t.Fatalf("reader accepted %v in the wrong direction or state", frame.Type())
		}
	}
}

// peekReader is an io.Reader over data that lets the test see the unread
// bytes. With a chunk above zero it returns at most chunk bytes per Read,
// so that the FrameReader's reads across short reads are exercised too.
type peekReader struct {
	data  []byte
	off   int
	chunk int
}

func (r *peekReader) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	if r.chunk > 0 {
		p = p[:min(len(p), r.chunk)]
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

// FuzzMessage decodes arbitrary messages with Receiver.DecodeMessage for
// both roles and both states: never panics, refusals are *Error with a
// valid code, and an accepted message is a canonical frame whose declared
// length is the message length.
func FuzzMessage(f *testing.F) {
	for _, v := range loadVectorSeeds(f).Frames {
		role, state := v.Role, v.State
		if role == 0 {
			role = RoleClient
		}
		if state == 0 {
			state = StateActive
		}
		f.Add(v.Wire, uint8(role), uint8(state))
	}
	for _, fr := range sampleFrames() {
		f.Add(AppendFrame(nil, fr), uint8(RoleClient), uint8(StateActive))
		f.Add(AppendFrame(nil, fr), uint8(RoleServer), uint8(StateActive))
	}
	f.Add([]byte{0, 0, 0}, uint8(RoleServer), uint8(StateHandshake))
	f.Fuzz(func(t *testing.T, msg []byte, role, state uint8) {
		rc := Receiver{Role: Role(role%2 + 1), State: ConnState(state%2 + 1)}
		if rc.State == StateActive {
			rc.Limits = ReferenceLimits()
		}
		fr, err := rc.DecodeMessage(msg)
		if err != nil {
			checkRefusal(t, "DecodeMessage", err)
			return
		}
		if int(binary.BigEndian.Uint32(msg)) != len(msg)-4 || FrameType(msg[4]) != fr.Type() {
			t.Fatalf("DecodeMessage accepted a length or type mismatch")
		}
		if uint32(len(msg)-4) > rc.FrameCap(fr.Type()) {
			t.Fatalf("DecodeMessage accepted a frame over the cap")
		}
		checkFrameCanonical(t, fr, msg[5:])
	})
}

// FuzzTLV iterates arbitrary bytes as a generic TLV body: never panics;
// field ids strictly ascend; on success the raw fields tile the body
// exactly; a refusal is MALFORMED_MESSAGE.
func FuzzTLV(f *testing.F) {
	for _, b := range frameSeeds(f) {
		if len(b) > 0 {
			f.Add(b[1:])
		}
	}
	for _, c := range loadVectorSeeds(f).Commands {
		f.Add(c.B)
	}
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x00, 4, 0})                                                 // non-minimal id
	f.Add([]byte{1, 4, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}) // overflowing length
	f.Add([]byte{1, 9, 0})                                                          // unknown wire type
	f.Add([]byte{1, 0, 0x85, 0x01, 2, 3, 8, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, body []byte) {
		d := NewTLVReader(body)
		slow := NewTLVReader(body) // advanced with nextSlow only
		var prev uint64
		var tiled []byte
		for d.Next() {
			if !slow.nextSlow() || slow.id != d.id || slow.wire != d.wire ||
				!bytes.Equal(slow.val, d.val) || !bytes.Equal(slow.raw, d.raw) {
				t.Fatalf("Next fast path and nextSlow disagree at field %d", d.id)
			}
			id := d.FieldID()
			if id <= prev {
				t.Fatalf("field ids not strictly ascending: %d after %d", id, prev)
			}
			prev = id
			raw := d.RawField()
			tiled = append(tiled, raw...)
			switch d.WireType() {
			case WireBytes, WireMessage, WireList, WireTagged:
				// The value is the tail of the raw field.
				if !bytes.HasSuffix(raw, d.val) {
					t.Fatalf("value is not the tail of the raw field")
				}
			}
			checkAccessors(t, d)
		}
		if slow.err == nil && len(slow.b) > 0 && slow.nextSlow() {
			t.Fatalf("nextSlow found a field after Next stopped")
		}
		if (d.err == nil) != (slow.err == nil) || d.err != nil && CodeOf(d.err) != CodeOf(slow.err) {
			t.Fatalf("Next and nextSlow end differently: %v / %v", d.err, slow.err)
		}
		err := d.Finish(0)
		if err != nil {
			if CodeOf(err) != MalformedMessage {
				t.Fatalf("TLV refusal with code %v, want MALFORMED_MESSAGE", CodeOf(err))
			}
			checkRefusal(t, "TLVReader", err)
			return
		}
		if !bytes.Equal(tiled, body) {
			t.Fatalf("raw fields do not tile the body")
		}
	})
}

// checkAccessors runs every fixed-width accessor on copies of d positioned
// at the current field and compares each with the positional reference
// (Pos, the positional read, Done): same value, same refusal.
func checkAccessors(t *testing.T, d TLVReader) {
	t.Helper()
	type acc struct {
		name       string
		fast       func(*TLVReader) any
		positional func(*PosReader) any
	}
	for _, a := range []acc{
		{"U8", func(d *TLVReader) any { return d.U8() }, func(r *PosReader) any { return r.U8() }},
		{"U16", func(d *TLVReader) any { return d.U16() }, func(r *PosReader) any { return r.U16() }},
		{"U32", func(d *TLVReader) any { return d.U32() }, func(r *PosReader) any { return r.U32() }},
		{"U64", func(d *TLVReader) any { return d.U64() }, func(r *PosReader) any { return r.U64() }},
		{"NonzeroU64", func(d *TLVReader) any { return d.NonzeroU64() }, func(r *PosReader) any { return r.NonzeroU64() }},
		{"ID16", func(d *TLVReader) any { return d.ID16() }, func(r *PosReader) any { return r.ID16() }},
		{"Bytes16", func(d *TLVReader) any { return d.Bytes16() }, func(r *PosReader) any { return r.Bytes16() }},
		{"Bool", func(d *TLVReader) any { return d.Bool() }, func(r *PosReader) any { return r.Bool() }},
	} {
		d1, d2 := d, d
		got := a.fast(&d1)
		r := d2.Pos()
		want := a.positional(&r)
		d2.Done(&r)
		if got != want || d1.seen != d2.seen || !reflect.DeepEqual(d1.err, d2.err) || len(d1.b) != len(d2.b) {
			t.Fatalf("%s: accessor (%v, %v) differs from the positional reference (%v, %v)", a.name, got, d1.err, want, d2.err)
		}
	}
}

// FuzzFrameDecode decodes (type byte, body) with DecodeFrame, which covers
// every frame decoder. Accepted bodies must be canonical (see
// checkFrameCanonical); for COORD_EVENT the fast path is also checked
// against the general decoder.
func FuzzFrameDecode(f *testing.F) {
	for _, b := range frameSeeds(f) {
		if len(b) > 0 {
			f.Add(b[0], b[1:])
		}
	}
	for _, t := range FrameTypes() {
		f.Add(byte(t), []byte{})
	}
	f.Add(byte(0x02), []byte{1, 4, 1, 0})
	f.Fuzz(func(t *testing.T, typ byte, body []byte) {
		if FrameType(typ) == TypeCoordEvent {
			checkCoordEventPaths(t, body)
		}
		fr, err := DecodeFrame(FrameType(typ), body)
		if err != nil {
			checkRefusal(t, "DecodeFrame", err)
			if !FrameType(typ).Known() && CodeOf(err) != ProtocolError {
				t.Fatalf("unknown type refused with %v, want PROTOCOL_ERROR", CodeOf(err))
			}
			return
		}
		if fr.Type() != FrameType(typ) {
			t.Fatalf("decoded %v for type byte %#x", fr.Type(), typ)
		}
		checkFrameCanonical(t, fr, body)
	})
}

// ---------------------------------------------------------------------------
// Nested types.

// nestedCodec is one positional nested type under FuzzNested. decode parses
// exactly b into v (refusing with an *Error); the value's image is
// v.Append.
type nestedCodec struct {
	name   string
	fresh  func() nestedValue
	decode func(v nestedValue, b []byte) error // nil: v.Decode
}

type nestedValue interface {
	Append(dst []byte) []byte
	Decode(b []byte) error
}

// nestedCodecs is the selector table of FuzzNested; a selector byte picks
// entry sel % len. Types whose image does not carry their kind
// (EffectPayload, SourceFactPayload, result payloads) take the kind from
// the first input byte.
var nestedCodecs = []nestedCodec{
	{name: "ObjectRef", fresh: func() nestedValue { return new(ObjectRef) }},
	{name: "Precondition", fresh: func() nestedValue { return new(Precondition) }},
	{name: "AuthorityGuard", fresh: func() nestedValue { return new(AuthorityGuard) }},
	{name: "TerminalBindingRef", fresh: func() nestedValue { return new(TerminalBindingRef) }},
	{name: "OperationResult", fresh: func() nestedValue { return new(OperationResult) }},
	{name: "SnapshotRecord", fresh: func() nestedValue { return new(SnapshotRecord) }},
	{name: "ReplayEvent", fresh: func() nestedValue { return new(ReplayEvent) }},
	{name: "ActivationCertificate", fresh: func() nestedValue { return new(ActivationCertificate) }},
	{name: "EffectAttempt", fresh: func() nestedValue { return new(EffectAttempt) }},
	{name: "TerminalSourceFact", fresh: func() nestedValue { return new(TerminalSourceFact) }},
	{name: "WorkloadGrant", fresh: func() nestedValue { return new(WorkloadGrant) }},
	{name: "WorkloadOffer", fresh: func() nestedValue { return new(WorkloadOffer) }},
	{name: "EffectTarget", fresh: func() nestedValue { return new(EffectTarget) }},
	{name: "TerminalSourceRef", fresh: func() nestedValue { return new(TerminalSourceRef) }},
	{name: "SourceGapPayload", fresh: func() nestedValue { return new(SourceGapPayload) }},
	{name: "WholeAuthoritySelector", fresh: func() nestedValue { return new(WholeAuthoritySelector) }},
	{name: "ObjectRefResult", fresh: func() nestedValue { return new(ObjectRefResult) }},
	{name: "StartedResult", fresh: func() nestedValue { return new(StartedResult) }},
	{name: "DocumentResult", fresh: func() nestedValue { return new(DocumentResult) }},
	{name: "EffectPayload", fresh: func() nestedValue { return new(EffectPayload) },
		decode: func(v nestedValue, b []byte) error {
			if len(b) == 0 {
				return malformed("fuzz.no_kind")
			}
			return v.(*EffectPayload).DecodeAs(EffectKind(b[0]), b[1:])
		}},
	{name: "ResultPayload", fresh: func() nestedValue { return new(anyResult) },
		decode: func(v nestedValue, b []byte) error {
			if len(b) == 0 {
				return malformed("fuzz.no_kind")
			}
			p, err := DecodeResultPayload(ResultKind(b[0]), b[1:])
			if err == nil {
				v.(*anyResult).p = p
			}
			return err
		}},
	{name: "SourceFactPayload", fresh: func() nestedValue { return new(SourceFactPayload) },
		decode: func(v nestedValue, b []byte) error {
			if len(b) == 0 {
				return malformed("fuzz.no_kind")
			}
			return v.(*SourceFactPayload).DecodeAs(SourceFactKind(b[0]), b[1:])
		}},
}

// anyResult holds a result payload of any kind, decoded by
// DecodeResultPayload.
type anyResult struct{ p ResultPayload }

func (a *anyResult) Append(dst []byte) []byte { return a.p.Append(dst) }
func (a *anyResult) Decode(b []byte) error    { return a.p.Decode(b) }

// nestedImage returns the image a decoded nested value must re-encode to:
// the input, minus the kind byte for the kind-prefixed entries.
func (c *nestedCodec) image(b []byte) []byte {
	if c.decode != nil {
		return b[1:]
	}
	return b
}

func (c *nestedCodec) run(v nestedValue, b []byte) error {
	if c.decode != nil {
		return c.decode(v, b)
	}
	return v.Decode(b)
}

func nestedIndex(name string) byte {
	for i, c := range nestedCodecs {
		if c.name == name {
			return byte(i)
		}
	}
	panic("no nested codec " + name)
}

// nestedSeeds walks decoded sample and vector frames with reflection and
// returns (selector, image) for every nested value found, so new fields of
// these types are picked up without edits here.
func nestedSeeds(tb testing.TB) [][2][]byte {
	byType := map[reflect.Type]byte{}
	for i, c := range nestedCodecs {
		if c.decode == nil {
			byType[reflect.TypeOf(c.fresh()).Elem()] = byte(i)
		}
	}
	var out [][2][]byte
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if sel, ok := byType[v.Type()]; ok && v.CanAddr() {
			if nv, ok := v.Addr().Interface().(nestedValue); ok {
				out = append(out, [2][]byte{{sel}, nv.Append(nil)})
			}
		}
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Struct {
				for i := range v.Len() {
					walk(v.Index(i))
				}
			}
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		}
	}
	for _, b := range frameSeeds(tb) {
		if len(b) == 0 {
			continue
		}
		if fr, err := DecodeFrame(FrameType(b[0]), b[1:]); err == nil {
			walk(reflect.ValueOf(fr))
		}
	}
	for _, c := range loadVectorSeeds(tb).Certs {
		out = append(out, [2][]byte{{nestedIndex("ActivationCertificate")}, c})
	}
	return append(out, generatedNestedSeeds()...)
}

// generatedNestedSeeds returns (selector, image) seeds drawn with the rapid
// generators (fixed example seeds, so the corpus is deterministic) for the
// nested types that no frame holds as a Go value — effect, terminal and
// result types, which travel as bytes inside record and typed payloads —
// and for every kind of the kind-prefixed entries.
func generatedNestedSeeds() [][2][]byte {
	var out [][2][]byte
	add := func(name string, img []byte) {
		out = append(out, [2][]byte{{nestedIndex(name)}, img})
	}
	for i := range 4 {
		rapid.Custom(func(t *rapid.T) int {
			br := faBindingRef(t)
			add("TerminalBindingRef", br.Append(nil))
			a := faEffectAttempt(t)
			add("EffectAttempt", a.Append(nil))
			add("EffectTarget", a.Target.Append(nil))
			pt := faTarget(t, TargetPendingSpawn)
			add("EffectTarget", pt.Append(nil))
			for k := EffectSpawn; k <= EffectProcessSignal; k++ {
				p := faEffectPayload(t, k)
				add("EffectPayload", p.Append([]byte{byte(k)}))
			}
			src := faSourceRef(t)
			add("TerminalSourceRef", src.Append(nil))
			for k := SourceFactKind(1); k <= 6; k++ {
				p := faSourceFactPayload(t, k)
				add("SourceFactPayload", p.Append([]byte{byte(k)}))
				f := TerminalSourceFact{Source: src, Kind: k, Schema: 1, Payload: p.Append(nil)}
				add("TerminalSourceFact", f.Append(nil))
			}
			g := SourceGapPayload{BindingID: BindingID(faID(t, "binding")), ExpectedSource: rapid.Uint64().Draw(t, "exp"),
				ObservedSource: rapid.Uint64().Draw(t, "obs"), Reason: SourceGapReason(rapid.IntRange(0, 2).Draw(t, "reason"))}
			add("SourceGapPayload", g.Append(nil))
			for k := ResultNone; k <= ResultDocument; k++ {
				p := faResultPayload(t, k)
				add("ResultPayload", p.Append([]byte{byte(k)}))
				switch p.(type) {
				case *ObjectRefResult:
					add("ObjectRefResult", p.Append(nil))
				case *StartedResult:
					add("StartedResult", p.Append(nil))
				case *DocumentResult:
					add("DocumentResult", p.Append(nil))
				}
			}
			o := faOperationResult(t)
			add("OperationResult", o.Append(nil))
			return 0
		}).Example(i)
	}
	return out
}

// FuzzNested decodes arbitrary bytes as the nested type picked by sel:
// never panics, refusals are *Error, and an accepted image re-encodes to
// itself exactly (positional images have no optional or unknown parts that
// a decoder may drop). Decoding into a reused value gives the same image.
func FuzzNested(f *testing.F) {
	for _, s := range nestedSeeds(f) {
		f.Add(s[0][0], s[1])
	}
	f.Add(nestedIndex("EffectPayload"), []byte{byte(EffectProcessSignal), 1})
	f.Add(nestedIndex("SourceFactPayload"), []byte{byte(SourceOpened)})
	f.Add(nestedIndex("OperationResult"), []byte{byte(OperationUnknown)})
	f.Fuzz(func(t *testing.T, sel byte, b []byte) {
		c := &nestedCodecs[int(sel)%len(nestedCodecs)]
		v := c.fresh()
		if err := c.run(v, b); err != nil {
			checkRefusal(t, c.name, err)
			return
		}
		got := v.Append(nil)
		if want := c.image(b); !bytes.Equal(got, want) {
			t.Fatalf("%s: accepted image does not re-encode to itself\n in  %x\n out %x", c.name, want, got)
		}
		// Reuse: decode the same image into the value again, after it held
		// a (possibly larger) earlier value.
		if err := c.run(v, b); err != nil {
			t.Fatalf("%s: second decode refused: %v", c.name, err)
		}
		if again := v.Append(nil); !bytes.Equal(again, got) {
			t.Fatalf("%s: decode into a reused value differs", c.name)
		}
	})
}

// ---------------------------------------------------------------------------
// Typed payloads.

// FuzzCommandPayload decodes (kind, bytes) with DecodeCommandPayload: an
// accepted payload re-encodes canonically to exactly the input (unknown
// fields are kept, at their canonical position) and CanonicalCommandPayload
// agrees.
func FuzzCommandPayload(f *testing.F) {
	for _, c := range loadVectorSeeds(f).Commands {
		f.Add(c.Kind, c.B)
	}
	for _, fr := range sampleFrames() {
		if c, ok := fr.(*CoordCommand); ok {
			f.Add(uint16(c.Kind), c.Payload)
		}
	}
	for k := range uint16(14) {
		f.Add(k, []byte{})
	}
	f.Fuzz(func(t *testing.T, kind uint16, b []byte) {
		p, err := DecodeCommandPayload(CommandKind(kind), b)
		if err != nil {
			checkRefusal(t, "DecodeCommandPayload", err)
			if _, err2 := CanonicalCommandPayload(CommandKind(kind), b); err2 == nil {
				t.Fatalf("CanonicalCommandPayload accepted what DecodeCommandPayload refused")
			}
			return
		}
		if p.Kind() != CommandKind(kind) {
			t.Fatalf("payload kind %v for %v", p.Kind(), CommandKind(kind))
		}
		if got := p.AppendTLV(nil); !bytes.Equal(got, b) {
			t.Fatalf("%v: accepted payload is not canonical\n in  %x\n out %x", CommandKind(kind), b, got)
		}
		canon, err := CanonicalCommandPayload(CommandKind(kind), b)
		if err != nil || !bytes.Equal(canon, b) {
			t.Fatalf("%v: CanonicalCommandPayload = %x, %v; want the input", CommandKind(kind), canon, err)
		}
		// Reuse the decoded value for a second decode.
		if err := p.DecodeTLV(b); err != nil || !bytes.Equal(p.AppendTLV(nil), b) {
			t.Fatalf("%v: decode into a reused payload differs (%v)", CommandKind(kind), err)
		}
	})
}

var (
	recordKnownOnce sync.Once
	recordKnown     map[uint16][128]bool
)

// manifestKind is the pseudo object kind under which FuzzRecordPayload
// decodes an ArtifactManifestDoc (schema 1, ADDENDUM C.6), the other
// server-side TLV document with the same unknown-field rule.
const manifestKind = 0xffff

// tlvDoc is a record payload or the manifest document.
type tlvDoc interface {
	AppendTLV(dst []byte) []byte
	DecodeTLV(b []byte) error
}

// decodeRecordLike decodes b as the record payload of kind, or as an
// ArtifactManifestDoc for manifestKind.
func decodeRecordLike(kind uint16, b []byte) (tlvDoc, error) {
	if kind == manifestKind {
		m := new(ArtifactManifestDoc)
		if err := m.DecodeTLV(b); err != nil {
			return nil, err
		}
		return m, nil
	}
	p, err := DecodeRecordPayload(ObjectKind(kind), b)
	if err != nil {
		return nil, err
	}
	if p.ObjectKind() != ObjectKind(kind) {
		return nil, errors.New("record payload of another kind")
	}
	return p, nil
}

// recordKeeps reports whether field id of a kind's record payload survives
// decode and re-encode (known fields do; unknown ones are skipped).
func recordKeeps(kind uint16, id uint64) bool {
	recordKnownOnce.Do(func() {
		recordKnown = map[uint16][128]bool{}
		for k := range uint16(32) {
			if !ObjectKind(k).Valid() {
				continue
			}
			recordKnown[k] = knownIDs(func(b []byte) error { _, err := decodeRecordLike(k, b); return err })
		}
		recordKnown[manifestKind] = knownIDs(func(b []byte) error { _, err := decodeRecordLike(manifestKind, b); return err })
	})
	return id < 128 && recordKnown[kind][id]
}

// FuzzRecordPayload decodes (object kind, bytes) with DecodeRecordPayload:
// an accepted payload re-encodes to the input minus its unknown fields
// (records are server-made; unknown fields are skipped, not kept).
func FuzzRecordPayload(f *testing.F) {
	for _, r := range loadVectorSeeds(f).Records {
		f.Add(r.Kind, r.B)
	}
	for _, b := range frameSeeds(f) {
		if len(b) == 0 || FrameType(b[0]) != TypeSnapshotPage {
			continue
		}
		var p SnapshotPage
		if p.DecodeBody(b[1:]) == nil {
			for _, r := range p.Records {
				f.Add(uint16(r.Object.Kind), r.Payload)
			}
		}
	}
	for k := range uint16(12) {
		f.Add(k, []byte{})
	}
	f.Add(uint16(manifestKind), (&ArtifactManifestDoc{WorkSessionID: WorkSessionID{1}, MediaType: "text/plain", Size: 5}).AppendTLV(nil))
	f.Fuzz(func(t *testing.T, kind uint16, b []byte) {
		p, err := decodeRecordLike(kind, b)
		if err != nil {
			if CodeOf(err) == Internal {
				t.Fatal(err)
			}
			checkRefusal(t, "DecodeRecordPayload", err)
			return
		}
		want := keepFields(b, func(id uint64) bool { return recordKeeps(kind, id) })
		got := p.AppendTLV(nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("kind %d: accepted record payload is not canonical (minus unknown fields)\n in   %x\n want %x\n got  %x", kind, b, want, got)
		}
		if err := p.DecodeTLV(b); err != nil || !bytes.Equal(p.AppendTLV(nil), got) {
			t.Fatalf("kind %d: decode into a reused payload differs (%v)", kind, err)
		}
	})
}

// TestFuzzHelpers checks the helpers the fuzz targets rely on, so that a
// broken probe cannot make the canonical checks vacuous.
func TestFuzzHelpers(t *testing.T) {
	if !frameKeeps(TypeCoordEvent, 9) || frameKeeps(TypeCoordEvent, 10) || !frameKeeps(TypeCoordCommand, 12) {
		t.Fatal("known-field probe is wrong for COORD_EVENT / COORD_COMMAND")
	}
	if got := len(loadVectorSeeds(t).Frames); got == 0 {
		if _, err := os.Stat(filepath.Join("..", "vectors")); err == nil {
			t.Fatal("vectors directory exists but no frame vectors were read")
		}
	}
	// Every sample is valid and canonical.
	for _, fr := range sampleFrames() {
		body := fr.AppendBody(nil)
		got, err := DecodeFrame(fr.Type(), body)
		if err != nil {
			t.Fatalf("sample %v refused: %v", fr.Type(), err)
		}
		checkFrameCanonical(t, got, body)
	}
	// An unknown field appended to COORD_EVENT is dropped, an extension
	// of COORD_COMMAND is kept.
	ev := sampleCoordEvent(3).AppendBody(nil)
	ev = append(ev, 12, WireVarint, 1)
	if fr, err := DecodeFrame(TypeCoordEvent, ev); err != nil {
		t.Fatal(err)
	} else {
		checkFrameCanonical(t, fr, ev)
	}
	if n := len(nestedSeeds(t)); n < 5 {
		t.Fatalf("only %d nested seeds", n)
	}
}
