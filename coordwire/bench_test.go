package coordwire

// Codec benchmarks. Encoders append into a reused buffer;
// decoders decode into a reused value, as a connection loop does. The
// comparison with protobuf and a fixed-layout baseline lives outside the
// library, in ../bench (BenchmarkCompareCoordEvent); the allocation
// targets are also asserted by TestHotPathAllocs (alloc_test.go) in the
// normal test run.

import (
	"bytes"
	"io"
	"testing"
)

// benchSnapshotRecords is the record count of the SNAPSHOT_PAGE benchmark.
const benchSnapshotRecords = 512

// benchSnapshotPayload is the opaque payload size of each of its records.
const benchSnapshotPayload = 64

func benchEncode(b *testing.B, f Frame) {
	buf := AppendFrame(nil, f)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = AppendFrame(buf[:0], f)
	}
}

// benchDecode decodes the body of f's frame into one reused value of the
// same type, after checking the envelope header as a receiver would.
func benchDecode(b *testing.B, f Frame, role Role) {
	msg := AppendFrame(nil, f)
	rc := Receiver{Role: role, State: StateActive, Limits: HardLimits()}
	into := NewFrame(f.Type())
	if err := into.DecodeBody(msg[5:]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := rc.CheckHeader(uint32(len(msg)-4), FrameType(msg[4])); err != nil {
			b.Fatal(err)
		}
		if err := into.DecodeBody(msg[5:]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeCoordEvent encodes a COORD_EVENT with a 200-byte payload
// (the whole frame, envelope included) into a reused buffer. Target: 0
// allocations.
func BenchmarkEncodeCoordEvent(b *testing.B) { benchEncode(b, sampleCoordEvent(200)) }

// BenchmarkDecodeCoordEvent decodes that frame into a reused CoordEvent.
// Target: at most 1 allocation (the payload storage is reused: 0).
func BenchmarkDecodeCoordEvent(b *testing.B) { benchDecode(b, sampleCoordEvent(200), RoleClient) }

// BenchmarkDecodeMessageCoordEvent decodes the frame with
// Receiver.DecodeMessage, which returns a new Frame each time (one
// allocation for the struct, one for the payload).
func BenchmarkDecodeMessageCoordEvent(b *testing.B) {
	msg := AppendFrame(nil, sampleCoordEvent(200))
	rc := Receiver{Role: RoleClient, State: StateActive, Limits: ReferenceLimits()}
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := rc.DecodeMessage(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeCoordCommandStartRun encodes a COORD_COMMAND carrying a
// START_RUN payload (256-byte executor document, two preconditions).
func BenchmarkEncodeCoordCommandStartRun(b *testing.B) { benchEncode(b, sampleCommandStartRun()) }

// BenchmarkDecodeCoordCommandStartRun decodes it into a reused
// CoordCommand (the decoder also validates the typed payload).
func BenchmarkDecodeCoordCommandStartRun(b *testing.B) {
	benchDecode(b, sampleCommandStartRun(), RoleServer)
}

// BenchmarkEncodeStartRunPayload encodes the START_RUN typed payload alone.
func BenchmarkEncodeStartRunPayload(b *testing.B) {
	var p StartRun
	if err := p.DecodeTLV(sampleCommandStartRun().Payload); err != nil {
		b.Fatal(err)
	}
	buf := p.AppendTLV(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = p.AppendTLV(buf[:0])
	}
}

// BenchmarkDecodeStartRunPayload decodes the START_RUN payload into a
// reused StartRun.
func BenchmarkDecodeStartRunPayload(b *testing.B) {
	payload := sampleCommandStartRun().Payload
	var p StartRun
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if err := p.DecodeTLV(payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeSnapshotPage512 encodes a SNAPSHOT_PAGE of 512 records
// (64-byte payloads) into a reused buffer.
func BenchmarkEncodeSnapshotPage512(b *testing.B) {
	benchEncode(b, sampleSnapshotPage(benchSnapshotRecords, benchSnapshotPayload))
}

// BenchmarkDecodeSnapshotPage512 decodes it into a reused SnapshotPage
// (records and payload storage reused).
func BenchmarkDecodeSnapshotPage512(b *testing.B) {
	benchDecode(b, sampleSnapshotPage(benchSnapshotRecords, benchSnapshotPayload), RoleClient)
}

// loopReader serves the same bytes forever.
type loopReader struct {
	data []byte
	off  int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off += n
	if r.off == len(r.data) {
		r.off = 0
	}
	return n, nil
}

// eventStream returns 64 consecutive COORD_EVENT frames (200-byte payloads).
func eventStream() []byte {
	ev := sampleCoordEvent(200)
	var stream []byte
	for i := range 64 {
		ev.DeliverySequence = DeliverySequence(i + 1)
		stream = AppendFrame(stream, ev)
	}
	return stream
}

// BenchmarkFrameReader reads COORD_EVENT frames from a byte stream with
// FrameReader.ReadRaw and decodes each into a reused CoordEvent: the
// receive loop of a subscriber.
func BenchmarkFrameReader(b *testing.B) {
	stream := eventStream()
	fr := NewFrameReader(&loopReader{data: stream}, RoleClient)
	fr.Activate(ReferenceLimits())
	var ev CoordEvent
	b.ReportAllocs()
	b.SetBytes(int64(len(stream) / 64))
	for b.Loop() {
		t, body, err := fr.ReadRaw()
		if err != nil || t != TypeCoordEvent {
			b.Fatal(t, err)
		}
		if err := ev.DecodeBody(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameReaderReadFrame reads the same stream with ReadFrame, which
// returns a new Frame per call.
func BenchmarkFrameReaderReadFrame(b *testing.B) {
	stream := eventStream()
	fr := NewFrameReader(&loopReader{data: stream}, RoleClient)
	fr.Activate(ReferenceLimits())
	b.ReportAllocs()
	b.SetBytes(int64(len(stream) / 64))
	for b.Loop() {
		if _, err := fr.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameWriter writes COORD_EVENT frames with FrameWriter.
func BenchmarkFrameWriter(b *testing.B) {
	ev := sampleCoordEvent(200)
	fw := NewFrameWriter(io.Discard)
	fw.MaxFrameBytes = HardMaxFrameBytes
	b.ReportAllocs()
	b.SetBytes(int64(len(AppendFrame(nil, ev))))
	for b.Loop() {
		if err := fw.WriteFrame(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeGarbage feeds a 200-byte non-TLV body to the COORD_EVENT
// decoder: the cost of a refusal.
func BenchmarkDecodeGarbage(b *testing.B) {
	body := bytes.Repeat([]byte{0xff}, 200)
	var ev CoordEvent
	b.ReportAllocs()
	for b.Loop() {
		if ev.DecodeBody(body) == nil {
			b.Fatal("accepted garbage")
		}
	}
}
