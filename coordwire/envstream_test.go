package coordwire

// The codec's zero-allocation receive path (§3.1): DecodeInto
// applies the negotiated caps to a reused value exactly as DecodeBody does;
// FrameReader's memory returns to its typical frame size after a large
// frame; the ALPN identifier is exported.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// retained returns the payload storage the reader holds: its own buffer
// plus a pooled buffer it has not yet given back.
func (fr *FrameReader) retained() int {
	n := cap(fr.env.small)
	if fr.env.large != nil {
		n += cap(*fr.env.large)
	}
	return n
}

func TestALPN(t *testing.T) {
	want := []byte{'p', 'h', 'u', 'x', '-', 'c', 'o', 'o', 'r', 'd', 'i', 'n', 'a', 't', 'o', 'r', '/', '1'}
	if !bytes.Equal([]byte(ALPN), want) {
		t.Fatalf("ALPN = %q, want %q", ALPN, want)
	}
}

// rawFrame is an envelope with a declared length of n (type + payload)
// whose payload is a counting pattern.
func rawFrame(t FrameType, n int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(n))
	b = append(b, byte(t))
	for i := range n - 1 {
		b = append(b, byte(i*7))
	}
	return b
}

func TestFrameReaderShrinksAfterLargeFrame(t *testing.T) {
	big := rawFrame(TypeCoordPing, HardMaxFrameBytes)     // the 1 MiB hard cap
	mid := rawFrame(TypeCoordPing, SmallPayloadBytes+100) // just above the small buffer
	small := AppendFrame(nil, &CoordPing{Nonce: 9})
	var stream []byte
	stream = append(stream, small...)
	stream = append(stream, big...)
	stream = append(stream, small...)
	stream = append(stream, mid...)
	stream = append(stream, small...)
	stream = append(stream, small...)
	fr := NewFrameReader(bytes.NewReader(stream), RoleServer)
	fr.Activate(HardLimits())

	read := func(want []byte) {
		t.Helper()
		typ, body, err := fr.ReadRaw()
		if err != nil {
			t.Fatal(err)
		}
		if typ != FrameType(want[4]) || !bytes.Equal(body, want[5:]) {
			t.Fatalf("read %v with %d payload bytes, want %v with %d", typ, len(body), FrameType(want[4]), len(want)-5)
		}
	}
	read(small)
	typical := fr.retained()
	read(big)
	if fr.retained() < HardMaxFrameBytes-1 {
		t.Fatalf("reader holds %d bytes while the 1 MiB body is live", fr.retained())
	}
	read(small)
	if got := fr.retained(); got > SmallPayloadBytes || got != typical {
		t.Fatalf("after a 1 MiB frame and a small one the reader retains %d bytes, want %d (<= %d)", got, typical, SmallPayloadBytes)
	}
	read(mid)
	read(small)
	if got := fr.retained(); got != typical {
		t.Fatalf("after a %d-byte frame the reader retains %d bytes, want %d", len(mid), got, typical)
	}
	// Release gives the pooled buffer back before the next read.
	fr2 := NewFrameReader(bytes.NewReader(big), RoleServer)
	fr2.Activate(HardLimits())
	if _, _, err := fr2.ReadRaw(); err != nil {
		t.Fatal(err)
	}
	fr2.Release()
	if fr2.retained() != 0 {
		t.Fatalf("after Release the reader retains %d bytes", fr2.retained())
	}
	fr2.Release() // idempotent
}

// TestFrameReaderReadFrameReleasesLarge: ReadFrame's result does not alias
// the buffer, so a large frame's pooled buffer is given back at once.
func TestFrameReaderReadFrameReleasesLarge(t *testing.T) {
	ev := sampleCoordEvent(200 << 10)
	wire := AppendFrame(nil, ev)
	fr := NewFrameReader(bytes.NewReader(wire), RoleClient)
	fr.Activate(HardLimits())
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Frame(ev), f); d != "" {
		t.Fatalf("ReadFrame (-want +got):\n%s", d)
	}
	if fr.retained() != 0 {
		t.Fatalf("after ReadFrame of a %d-byte frame the reader retains %d bytes", len(wire), fr.retained())
	}
	if _, err := fr.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

// TestFrameReaderLargeTruncated: a stream that ends inside a large payload
// gives io.ErrUnexpectedEOF and the pooled buffer back.
func TestFrameReaderLargeTruncated(t *testing.T) {
	big := rawFrame(TypeCoordPing, 100<<10)
	fr := NewFrameReader(bytes.NewReader(big[:len(big)-1]), RoleServer)
	fr.Activate(HardLimits())
	if _, _, err := fr.ReadRaw(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
	if fr.retained() != 0 {
		t.Fatalf("after a truncated large frame the reader retains %d bytes", fr.retained())
	}
}

// TestFrameReaderLargeFramesAllocs: large frames in a steady stream reuse
// pooled buffers.
func TestFrameReaderLargeFramesAllocs(t *testing.T) {
	if faRace {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	var stream []byte
	stream = append(stream, rawFrame(TypeCoordPing, 600<<10)...)
	stream = append(stream, rawFrame(TypeCoordPing, 40<<10)...)
	stream = append(stream, AppendFrame(nil, &CoordPing{Nonce: 1})...)
	fr := NewFrameReader(&loopReader{data: stream}, RoleServer)
	fr.Activate(HardLimits())
	if n := testing.AllocsPerRun(30, func() {
		if _, _, err := fr.ReadRaw(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ReadRaw of pooled large frames: %v allocs, want 0", n)
	}
}

func TestLargeClasses(t *testing.T) {
	for _, c := range []struct{ n, size int }{
		{SmallPayloadBytes + 1, 32 << 10}, {32 << 10, 32 << 10}, {32<<10 + 1, 64 << 10},
		{512 << 10, 512 << 10}, {512<<10 + 1, 1 << 20}, {HardMaxFrameBytes - 1, 1 << 20},
	} {
		if got := largeMin << largeClass(c.n); got != c.size {
			t.Errorf("payload %d: class size %d, want %d", c.n, got, c.size)
		}
	}
}

// narrowLimits are negotiated limits far below the hard caps.
var narrowLimits = Limits{
	MaxFrameBytes:        HardMaxFrameBytes,
	MaxPageBytes:         2048,
	MaxPageRecords:       2,
	MaxTypedPayloadBytes: 100,
	MaxEventCreditCount:  10,
	MaxEventCreditBytes:  1 << 20,
}

func sampleReplayPage(n, payloadSize int) *ReplayPage {
	p := &ReplayPage{RequestID: 4, ReplayID: ReplayID{4, 5}, Cursor: []byte("r0"), PageIndex: 2, NextCursor: []byte("r1")}
	for i := range n {
		var id [16]byte
		binary.BigEndian.PutUint64(id[8:], uint64(i+1))
		p.Events = append(p.Events, ReplayEvent{
			EventSequence:  EventSequence(i + 10),
			EventID:        id,
			EventKind:      EventRunChanged,
			Object:         ObjectRef{Kind: ObjectKindRun, ID: id},
			ObjectRevision: ObjectRevision(i + 1),
			Schema:         1,
			Payload:        bytes.Repeat([]byte{byte(i)}, payloadSize),
		})
	}
	return p
}

// TestDecodeIntoLimits: for each frame with a negotiated cap, a body within
// the cap decodes into a reused value allocation-free; a body over it is
// refused by DecodeInto with the same code and reason as DecodeBody.
func TestDecodeIntoLimits(t *testing.T) {
	for _, c := range []struct {
		name     string
		role     Role
		ok, over Frame
		reason   string
	}{
		{"snapshot_records", RoleClient, sampleSnapshotPage(2, 10), sampleSnapshotPage(3, 10), "limits.page_records"},
		{"snapshot_bytes", RoleClient, sampleSnapshotPage(2, 10), sampleSnapshotPage(2, 1200), "limits.page_bytes"},
		{"replay_records", RoleClient, sampleReplayPage(2, 10), sampleReplayPage(3, 10), "limits.page_records"},
		{"replay_bytes", RoleClient, sampleReplayPage(2, 10), sampleReplayPage(2, 1100), "limits.page_bytes"},
		{"replay_typed_payload", RoleClient, sampleReplayPage(2, 100), sampleReplayPage(1, 101), "limits.typed_payload"},
		{"event_typed_payload", RoleClient, sampleCoordEvent(100), sampleCoordEvent(101), "limits.typed_payload"},
		{"command_typed_payload", RoleServer, &CoordCommand{RequestID: 1, Guard: sampleCommandStartRun().Guard, OperationID: OperationID{1},
			Kind: CommandCancelRun, Payload: (&CancelRun{RunID: RunID{2}}).AppendTLV(nil)}, sampleCommandStartRun(), "limits.typed_payload"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := Receiver{Role: c.role, State: StateActive, Limits: narrowLimits}
			typ := c.ok.Type()
			into := NewFrame(typ)
			okBody := c.ok.AppendBody(nil)
			if err := rc.DecodeInto(typ, okBody, into); err != nil {
				t.Fatalf("DecodeInto within the caps: %v", err)
			}
			if d := cmp.Diff(c.ok, into); d != "" {
				t.Fatalf("DecodeInto (-want +got):\n%s", d)
			}
			if !faRace {
				if n := testing.AllocsPerRun(50, func() {
					if err := rc.DecodeInto(typ, okBody, into); err != nil {
						t.Fatal(err)
					}
				}); n != 0 {
					t.Errorf("DecodeInto into a reused value: %v allocs, want 0", n)
				}
			}
			overBody := c.over.AppendBody(nil)
			_, want := rc.DecodeBody(typ, overBody)
			got := rc.DecodeInto(typ, overBody, into)
			var we, ge *Error
			if !errors.As(want, &we) || !errors.As(got, &ge) {
				t.Fatalf("DecodeBody: %v, DecodeInto: %v; want *Error from both", want, got)
			}
			if d := cmp.Diff(we, ge); d != "" || we.Code != FrameTooLarge || we.Reason != c.reason {
				t.Fatalf("DecodeInto refusal %v, DecodeBody refusal %v, want %v %s", ge, we, FrameTooLarge, c.reason)
			}
			// In the handshake state the negotiated caps do not apply yet,
			// for either decoder.
			hs := Receiver{Role: c.role, State: StateHandshake, Limits: narrowLimits}
			_, errBody := hs.DecodeBody(typ, overBody)
			if errInto := hs.DecodeInto(typ, overBody, into); errInto != nil || errBody != nil {
				t.Fatalf("handshake state: DecodeInto %v, DecodeBody %v, want nil", errInto, errBody)
			}
		})
	}
}

func TestDecodeIntoTypeMismatch(t *testing.T) {
	rc := Receiver{Role: RoleServer, State: StateActive, Limits: narrowLimits}
	body := (&CoordPing{Nonce: 1}).AppendBody(nil)
	for _, f := range []Frame{new(CoordPong), nil} {
		err := rc.DecodeInto(TypeCoordPing, body, f)
		var e *Error
		if !errors.As(err, &e) || e.Code != Internal || e.Reason != "frame.type_mismatch" {
			t.Fatalf("DecodeInto(%T): %v, want INTERNAL frame.type_mismatch", f, err)
		}
	}
	var p CoordPing
	if err := rc.DecodeInto(TypeCoordPing, body, &p); err != nil || p.Nonce != 1 {
		t.Fatalf("DecodeInto(CoordPing): %v, %+v", err, p)
	}
}

// catalogErr is a foreign catalog's error type; EnvelopeReader returns it
// unchanged.
type catalogErr struct{ what string }

func (e *catalogErr) Error() string { return e.what }

// tinyCatalog accepts type 0x42 only, with at most 8 bytes.
type tinyCatalog struct{ calls []string }

func (c *tinyCatalog) CheckLength(n uint32) error {
	c.calls = append(c.calls, "length")
	if n == 0 || n > 8 {
		return &catalogErr{"length"}
	}
	return nil
}

func (c *tinyCatalog) CheckType(n uint32, t byte) error {
	c.calls = append(c.calls, "type")
	if t != 0x42 {
		return &catalogErr{"type"}
	}
	return nil
}

// TestEnvelopeReaderRules: the catalog decides before any further byte is
// read: the length before the type byte, the type before the payload.
func TestEnvelopeReaderRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		wire  []byte
		want  string // catalogErr text, or "" for success
		eof   error
		calls int
	}{
		{"ok", []byte{0, 0, 0, 3, 0x42, 7, 8}, "", nil, 2},
		{"length_first", []byte{0, 0, 0, 9}, "length", nil, 1},
		{"zero", []byte{0, 0, 0, 0}, "length", nil, 1},
		{"type_before_payload", []byte{0, 0, 0, 5, 0x43}, "type", nil, 2},
		{"eof", nil, "", io.EOF, 0},
		{"eof_in_length", []byte{0, 0}, "", io.ErrUnexpectedEOF, 0},
		{"eof_before_type", []byte{0, 0, 0, 3}, "", io.ErrUnexpectedEOF, 1},
		{"eof_in_payload", []byte{0, 0, 0, 3, 0x42, 7}, "", io.ErrUnexpectedEOF, 2},
	} {
		var cat tinyCatalog
		typ, body, err := NewEnvelopeReader(bytes.NewReader(c.wire)).Next(&cat)
		var ce *catalogErr
		switch {
		case c.eof != nil:
			if !errors.Is(err, c.eof) {
				t.Errorf("%s: %v, want %v", c.name, err, c.eof)
			}
		case c.want != "":
			if !errors.As(err, &ce) || ce.what != c.want {
				t.Errorf("%s: %v, want the catalog's %q refusal", c.name, err, c.want)
			}
		default:
			if err != nil || typ != 0x42 || !bytes.Equal(body, []byte{7, 8}) {
				t.Errorf("%s: %x %x %v", c.name, typ, body, err)
			}
		}
		if len(cat.calls) != c.calls {
			t.Errorf("%s: catalog calls %v, want %d", c.name, cat.calls, c.calls)
		}
	}
}

type acceptAll struct{}

func (acceptAll) CheckLength(uint32) error     { return nil }
func (acceptAll) CheckType(uint32, byte) error { return nil }

func TestEnvelopeReaderZeroLengthCatalogBug(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a catalog that accepts length 0")
		}
	}()
	NewEnvelopeReader(bytes.NewReader([]byte{0, 0, 0, 0})).Next(acceptAll{})
}
