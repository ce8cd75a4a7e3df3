package coordwire

// The buffered envelope reader (§3.1 "Envelope and allocation order"):
// it reads ahead with one read per chunk instead of three per frame, yet
// the length and type still go into fixed storage and every rule still
// refuses before any payload storage is taken — also when the refused
// header arrives in one chunk with later bytes — and an idle reader holds
// only its fixed storage.

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// readAhead returns the pooled read-ahead buffer a buffered reader holds
// (0 when it holds only its fixed storage).
func (fr *FrameReader) readAhead() int {
	if fr.env.ahead == nil {
		return 0
	}
	return cap(*fr.env.ahead)
}

// countingReader counts the reads of its source (the system calls a
// socket would make) and returns at most chunk bytes per read (chunk 0:
// as many as asked).
type countingReader struct {
	src   io.Reader
	chunk int
	reads int
}

func (r *countingReader) Read(p []byte) (int, error) {
	r.reads++
	if r.chunk > 0 && len(p) > r.chunk {
		p = p[:r.chunk]
	}
	return r.src.Read(p)
}

// anyType is a catalog that accepts every nonzero length and every type:
// the tests of the read-ahead compare raw envelopes.
type anyType struct{}

func (anyType) CheckLength(n uint32) error {
	if n == 0 {
		return &catalogErr{"length"}
	}
	return nil
}
func (anyType) CheckType(uint32, byte) error { return nil }

// envelope is one raw frame: its type and payload.
type envelope struct {
	T    byte
	Body []byte
}

// splitStream is a stream of the sample frames (both directions, every
// size class: a frame longer than the read-ahead, one just inside it)
// and its envelopes.
func splitStream() ([]byte, []envelope) {
	frames := sampleFrames()
	frames = append(frames, sampleCoordEvent(readAheadBytes+3000), sampleCoordEvent(readAheadBytes-200), &CoordPing{Nonce: 77})
	var stream []byte
	var want []envelope
	for _, f := range frames {
		b := AppendFrame(nil, f)
		stream = append(stream, b...)
		want = append(want, envelope{b[4], b[5:]})
	}
	return stream, want
}

// readEnvelopes reads envelopes until an error and returns copies of them
// with the error.
func readEnvelopes(er *EnvelopeReader) ([]envelope, error) {
	var got []envelope
	for {
		typ, body, err := er.Next(anyType{})
		if err != nil {
			return got, err
		}
		got = append(got, envelope{typ, bytes.Clone(body)})
	}
}

// TestBufferedReaderSplitFrames: a stream whose frames are split across
// many reads of every size — one byte, a few, a header's worth, half of
// what was asked, more than the fixed storage, whole — reads as exactly
// the envelopes sent, a last read that returns data with io.EOF included;
// at the end the reader holds no pooled buffer.
func TestBufferedReaderSplitFrames(t *testing.T) {
	stream, want := splitStream()
	for name, src := range map[string]func() io.Reader{
		"one_byte":   func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"half":       func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		"data_eof":   func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
		"chunks_3":   func() io.Reader { return &countingReader{src: bytes.NewReader(stream), chunk: 3} },
		"chunks_5":   func() io.Reader { return &countingReader{src: bytes.NewReader(stream), chunk: 5} },
		"chunks_7":   func() io.Reader { return &countingReader{src: bytes.NewReader(stream), chunk: 7} },
		"chunks_513": func() io.Reader { return &countingReader{src: bytes.NewReader(stream), chunk: idleReadBytes + 1} },
		"chunks_4k":  func() io.Reader { return &countingReader{src: bytes.NewReader(stream), chunk: 4096} },
		"whole":      func() io.Reader { return bytes.NewReader(stream) },
	} {
		t.Run(name, func(t *testing.T) {
			er := NewBufferedEnvelopeReader(src())
			got, err := readEnvelopes(er)
			if err != io.EOF {
				t.Fatalf("after %d envelopes: %v, want io.EOF", len(got), err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("envelopes (-want +got):\n%s", d)
			}
			if er.large != nil || er.ahead != nil || er.small != nil {
				t.Fatalf("at the end of the stream the reader holds a pooled or payload buffer")
			}
		})
	}
	// The same through FrameReader, which decodes: the frames of one
	// direction, split into 7-byte reads.
	_, fromServer := streamScript(t)
	var wire []byte
	for _, f := range fromServer[1:] {
		wire = AppendFrame(wire, f)
	}
	fr := NewFrameReader(&countingReader{src: bytes.NewReader(wire), chunk: 7}, RoleClient)
	fr.Activate(ReferenceLimits())
	for i, f := range fromServer[1:] {
		got, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if d := cmp.Diff(f, got, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("frame %d (-want +got):\n%s", i, d)
		}
	}
}

// TestBufferedReaderTruncated: a stream that ends inside a header or a
// payload — in the fixed storage, in the read-ahead, or in a frame longer
// than the read-ahead — gives io.ErrUnexpectedEOF after exactly the whole
// frames before the cut, and io.EOF when it ends between frames.
func TestBufferedReaderTruncated(t *testing.T) {
	stream, want := splitStream()
	type cut struct{ end, whole int }
	cuts := []cut{{2, 0}, {4, 0}, {5, 0}, {6, 0}}
	off := 0
	for i, e := range want {
		n := 5 + len(e.Body)
		cuts = append(cuts, cut{off + n - 1, i}, cut{off + n + 3, i + 1})
		off += n
	}
	for _, c := range cuts {
		if c.end >= len(stream) {
			continue
		}
		for _, chunk := range []int{0, 7} {
			got, err := readEnvelopes(NewBufferedEnvelopeReader(&countingReader{src: bytes.NewReader(stream[:c.end]), chunk: chunk}))
			if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != c.whole {
				t.Fatalf("stream cut at %d (chunk %d): %v after %d envelopes, want io.ErrUnexpectedEOF after %d", c.end, chunk, err, len(got), c.whole)
			}
		}
	}
	got, err := readEnvelopes(NewBufferedEnvelopeReader(bytes.NewReader(stream[:5+len(want[0].Body)])))
	if err != io.EOF || len(got) != 1 {
		t.Fatalf("stream ending after the first frame: %v after %d envelopes, want io.EOF after 1", err, len(got))
	}
}

// TestBufferedReaderOneReadPerChunk: 64 COORD_EVENTs that arrive in one
// chunk cost a few reads in all (one into the fixed storage, then reads
// as large as the read-ahead), not three per frame.
func TestBufferedReaderOneReadPerChunk(t *testing.T) {
	stream := eventStream()
	src := &countingReader{src: bytes.NewReader(stream)}
	fr := NewFrameReader(src, RoleClient)
	fr.Activate(ReferenceLimits())
	var ev CoordEvent
	for i := range 64 {
		typ, body, err := fr.ReadRaw()
		if err == nil {
			err = fr.DecodeInto(typ, body, &ev)
		}
		if err != nil || ev.DeliverySequence != DeliverySequence(i+1) {
			t.Fatalf("event %d: %v, delivery %d", i, err, ev.DeliverySequence)
		}
	}
	if want := 2 + len(stream)/readAheadBytes; src.reads > want {
		t.Fatalf("64 frames in one %d-byte chunk took %d reads, want at most %d", len(stream), src.reads, want)
	}
}

// TestBufferedReaderIdleHoldsFixedStorage: while a burst is read the
// reader holds one read-ahead buffer; once the stream has caught up (a
// read that did not fill it) and every buffered byte is used, it gives
// the buffer back and holds only its fixed storage; a lone small frame
// never takes one.
func TestBufferedReaderIdleHoldsFixedStorage(t *testing.T) {
	peer, local := tcpPair(t)
	local.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr := NewFrameReader(local, RoleClient)
	fr.Activate(ReferenceLimits())
	burst := eventStream()
	if _, err := peer.Write(burst); err != nil {
		t.Fatal(err)
	}
	held := 0
	for i := range 64 {
		if _, err := fr.ReadFrame(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if i < 63 {
			held = max(held, fr.readAhead())
		}
	}
	if held != readAheadBytes {
		t.Fatalf("in a %d-byte burst the reader held at most %d read-ahead bytes, want %d", len(burst), held, readAheadBytes)
	}
	if fr.readAhead() != 0 || fr.retained() != 0 {
		t.Fatalf("after the burst the reader holds %d read-ahead and %d payload bytes, want 0", fr.readAhead(), fr.retained())
	}
	ping := AppendFrame(nil, &CoordPing{Nonce: 3})
	if _, err := peer.Write(ping); err != nil {
		t.Fatal(err)
	}
	if f, err := fr.ReadFrame(); err != nil || f.(*CoordPing).Nonce != 3 {
		t.Fatalf("lone frame: %v %v", f, err)
	}
	if fr.readAhead() != 0 {
		t.Fatalf("a lone %d-byte frame took a %d-byte read-ahead buffer", len(ping), fr.readAhead())
	}
}

// TestBufferedReaderRefusesLikeUnbuffered: every envelope refusal of the
// buffered reader equals the unbuffered reader's (same code and reason,
// same catalog calls) when the refused header arrives in one chunk with
// later bytes — its would-be payload and a further valid frame — over a
// real TCP connection and a net.Pipe and from memory, and it takes no
// payload storage: the over-cap length is refused before the type byte
// is looked at, the wrong type before the payload.
func TestBufferedReaderRefusesLikeUnbuffered(t *testing.T) {
	tail := AppendFrame(nil, &CoordPing{Nonce: 1})
	filler := bytes.Repeat([]byte{0xab}, 2000)
	for _, c := range []struct {
		name   string
		role   Role
		active bool
		header []byte
		code   ErrorCode
	}{
		{"zero_length", RoleServer, false, []byte{0, 0, 0, 0}, MalformedMessage},
		{"over_hard_cap", RoleServer, true, []byte{0, 0x10, 0, 1, byte(TypeCoordCommand)}, FrameTooLarge},
		{"over_negotiated_cap", RoleServer, true, []byte{0, 0x08, 0, 1, byte(TypeCoordCommand)}, FrameTooLarge},
		{"handshake_over_16k", RoleServer, false, []byte{0, 0, 0x40, 1, byte(TypeCoordHello)}, FrameTooLarge},
		{"unknown_type", RoleServer, true, []byte{0, 0, 0, 9, 0x55}, ProtocolError},
		{"wrong_direction", RoleServer, true, []byte{0, 0, 0, 9, byte(TypeCoordEvent)}, ProtocolError},
		{"wrong_state", RoleServer, false, []byte{0, 0, 0, 9, byte(TypeCoordCommand)}, ProtocolError},
		{"wrong_step", RoleClient, false, []byte{0, 0, 0, 9, byte(TypeCoordPong)}, ProtocolError},
		{"client_wrong_direction", RoleClient, true, []byte{0, 0, 0, 9, byte(TypeCredit)}, ProtocolError},
	} {
		t.Run(c.name, func(t *testing.T) {
			chunk := append(append(append([]byte(nil), c.header...), filler...), tail...)
			setup := func(fr *FrameReader) *FrameReader {
				if c.active {
					fr.Activate(ReferenceLimits())
				} else if c.role == RoleClient {
					fr.SetStep(StepAwaitHelloOK)
				}
				return fr
			}
			// The unbuffered reader's refusal, from the same bytes.
			exact := &FrameReader{Receiver: Receiver{Role: c.role, State: StateHandshake}, env: EnvelopeReader{r: bytes.NewReader(chunk)}}
			_, want := setup(exact).ReadFrame()
			if !errors.Is(want, c.code) {
				t.Fatalf("unbuffered reader: %v, want %v", want, c.code)
			}
			check := func(where string, fr *FrameReader, err error) {
				t.Helper()
				if d := cmp.Diff(want, err, cmp.Comparer(func(a, b *Error) bool { return *a == *b })); d != "" {
					t.Fatalf("%s: buffered refusal differs from the unbuffered one (-want +got):\n%s", where, d)
				}
				if fr.retained() != 0 {
					t.Fatalf("%s: reader reserved %d payload bytes before refusing", where, fr.retained())
				}
			}
			mem := &countingReader{src: bytes.NewReader(chunk)}
			fr := setup(NewFrameReader(mem, c.role))
			_, err := fr.ReadFrame()
			check("memory", fr, err)
			if mem.reads != 1 {
				t.Fatalf("memory: %d reads, want the one read that brought the header", mem.reads)
			}
			for name, pair := range map[string]func(*testing.T) (net.Conn, net.Conn){"tcp": tcpPair, "pipe": pipePair} {
				peer, local := pair(t)
				go peer.Write(chunk) // then nothing: the connection stays open
				local.SetReadDeadline(time.Now().Add(5 * time.Second))
				fr := setup(NewFrameReader(local, c.role))
				_, err := fr.ReadFrame()
				var ne net.Error
				if errors.As(err, &ne) {
					t.Fatalf("%s: reader waited: %v", name, err)
				}
				check(name, fr, err)
			}
		})
	}
}

// TestBufferedEnvelopeReaderRules: the catalog decides in the same order
// as with the unbuffered reader — the length before the type byte is
// looked at, the type before the payload — when the whole stream, later
// bytes included, is one chunk.
func TestBufferedEnvelopeReaderRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		wire  []byte
		want  string // catalogErr text, or "" for success
		eof   error
		calls int
	}{
		{"ok", []byte{0, 0, 0, 3, 0x42, 7, 8, 0, 0, 0, 9}, "", nil, 2},
		{"length_first", []byte{0, 0, 0, 9, 0x43, 1, 2, 3, 4, 5, 6, 7, 8}, "length", nil, 1},
		{"zero", []byte{0, 0, 0, 0, 0x42}, "length", nil, 1},
		{"type_before_payload", []byte{0, 0, 0, 5, 0x43, 1, 2, 3, 4, 0, 0, 0, 2, 0x42, 1}, "type", nil, 2},
		{"eof", nil, "", io.EOF, 0},
		{"eof_in_length", []byte{0, 0}, "", io.ErrUnexpectedEOF, 0},
		{"eof_before_type", []byte{0, 0, 0, 3}, "", io.ErrUnexpectedEOF, 1},
		{"eof_in_payload", []byte{0, 0, 0, 3, 0x42, 7}, "", io.ErrUnexpectedEOF, 2},
	} {
		var cat tinyCatalog
		er := NewBufferedEnvelopeReader(bytes.NewReader(c.wire))
		typ, body, err := er.Next(&cat)
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
			if err != nil || typ != 0x42 || !bytes.Equal(body, []byte{7, 8}) || cap(body) != 2 {
				t.Errorf("%s: %x %x (cap %d) %v", c.name, typ, body, cap(body), err)
			}
		}
		if len(cat.calls) != c.calls {
			t.Errorf("%s: catalog calls %v, want %d", c.name, cat.calls, c.calls)
		}
		if er.small != nil || er.large != nil {
			t.Errorf("%s: payload storage taken (%d small, large %v)", c.name, cap(er.small), er.large != nil)
		}
	}
}

// TestBufferedReaderNoProgress: a source that returns neither bytes nor
// an error makes the reader give up with io.ErrNoProgress, not spin.
func TestBufferedReaderNoProgress(t *testing.T) {
	fr := NewFrameReader(&countingReader{src: eofless{}}, RoleServer)
	if _, _, err := fr.ReadRaw(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}

type eofless struct{}

func (eofless) Read([]byte) (int, error) { return 0, nil }

// TestBufferedReaderAllocs: steady small frames read in place and steady
// large frames in pooled buffers allocate nothing, whatever the chunking.
func TestBufferedReaderAllocs(t *testing.T) {
	if faRace {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	var stream []byte
	stream = append(stream, eventStream()...)
	stream = append(stream, rawFrame(TypeCoordPing, 100<<10)...)
	stream = append(stream, AppendFrame(nil, &CoordPing{Nonce: 1})...)
	for _, chunk := range []int{0, 300, 7} {
		fr := NewFrameReader(&countingReader{src: &loopReader{data: stream}, chunk: chunk}, RoleClient)
		fr.Activate(HardLimits())
		if n := testing.AllocsPerRun(200, func() {
			if _, _, err := fr.ReadRaw(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("chunk %d: ReadRaw %v allocs, want 0", chunk, n)
		}
	}
}
