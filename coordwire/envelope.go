package coordwire

import (
	"encoding/binary"
	"errors"
	"io"
)

// Receiver holds the envelope rules of one receiving endpoint (§3.1): its
// role, the connection state, and (after COORD_HELLO_OK) the selected
// limits. The zero value is not usable; set Role and State.
type Receiver struct {
	// Role is the receiving side: RoleServer accepts C→S frames.
	Role Role
	// State is StateHandshake until COORD_HELLO_OK, then StateActive.
	State ConnState
	// Step narrows StateHandshake to the frames of one handshake step
	// (HandshakeStep.LegalAt); StepAny, the zero value, applies only the
	// envelope's handshake rules. Unused in StateActive.
	Step HandshakeStep
	// Limits are the selected limits; used only in StateActive. A zero
	// MaxFrameBytes in StateActive means the hard cap.
	Limits Limits
}

// FrameCap returns the largest declared length (type + payload) the
// receiver accepts for a frame of type t in its current state.
func (rc *Receiver) FrameCap(t FrameType) uint32 {
	if rc.State != StateActive {
		return HandshakeMaxFrameBytes
	}
	if rc.Limits.MaxFrameBytes == 0 || rc.Limits.MaxFrameBytes > HardMaxFrameBytes {
		return HardMaxFrameBytes
	}
	return rc.Limits.MaxFrameBytes
}

// CheckHeader applies every envelope rule that needs only the declared
// length and the type byte, in this order: length 0 (MALFORMED_MESSAGE
// "envelope.zero_length"); above the 1 MiB hard cap (FRAME_TOO_LARGE
// "envelope.over_hard_cap"); unknown type, wrong direction, wrong state
// (PROTOCOL_ERROR "envelope.unknown_type", "envelope.wrong_direction",
// "envelope.wrong_state"); in StateHandshake at a Step, a type not legal
// at that step (PROTOCOL_ERROR "handshake.unexpected_frame"); above the
// state's cap (FRAME_TOO_LARGE
// "envelope.over_handshake_cap" or "envelope.over_frame_cap"). It is
// called before any payload byte is read or allocated.
func (rc *Receiver) CheckHeader(length uint32, t FrameType) error {
	if length == 0 {
		return malformed("envelope.zero_length")
	}
	if length > HardMaxFrameBytes {
		return tooLarge("envelope.over_hard_cap")
	}
	s := frameSpecs[t]
	if s == nil {
		return protocolErr("envelope.unknown_type")
	}
	sender := RoleClient
	if rc.Role == RoleClient {
		sender = RoleServer
	}
	if !t.SentBy(sender) {
		return protocolErr("envelope.wrong_direction")
	}
	if !t.LegalFrom(sender, rc.State) {
		return protocolErr("envelope.wrong_state")
	}
	if rc.State == StateHandshake && rc.Step != StepAny && !t.LegalAt(rc.Step) {
		return protocolErr("handshake.unexpected_frame")
	}
	if length > rc.FrameCap(t) {
		if rc.State != StateActive {
			return tooLarge("envelope.over_handshake_cap")
		}
		return tooLarge("envelope.over_frame_cap")
	}
	return nil
}

// limitChecked is implemented by frames with caps narrower than the frame
// cap (pages, typed payloads); Receiver applies it in StateActive.
type limitChecked interface {
	checkLimits(l *Limits) error
}

// DecodeBody decodes a body whose header already passed CheckHeader into
// a new frame, and applies the negotiated narrower caps of pages and typed
// payloads (see DecodeInto).
func (rc *Receiver) DecodeBody(t FrameType, body []byte) (Frame, error) {
	f, err := DecodeFrame(t, body)
	if err != nil {
		return nil, err
	}
	if err := rc.applyLimits(f); err != nil {
		return nil, err
	}
	return f, nil
}

// DecodeInto is DecodeBody into a value the caller reuses: it decodes
// body, whose header already passed CheckHeader with type t, into f (which
// must be a frame of type t, e.g. from NewFrame(t)), reusing f's storage,
// and then applies in StateActive the negotiated caps narrower than the
// frame cap: the page payload bytes and records of SNAPSHOT_PAGE and
// REPLAY_PAGE ("limits.page_bytes", "limits.page_records") and the typed
// payload of COORD_COMMAND and COORD_EVENT ("limits.typed_payload"), all
// FRAME_TOO_LARGE, exactly as DecodeBody does (cursors and names have
// fixed caps that the strict decoder applies). It refuses an f whose type
// is not t with INTERNAL "frame.type_mismatch" (a caller bug, never peer
// input). A frame that decodes allocation-free with DecodeBody on a reused
// value decodes allocation-free here. After an error f's contents are
// unspecified.
func (rc *Receiver) DecodeInto(t FrameType, body []byte, f Frame) error {
	if f == nil || f.Type() != t {
		return &Error{Code: Internal, Reason: "frame.type_mismatch"}
	}
	if err := f.DecodeBody(body); err != nil {
		return err
	}
	return rc.applyLimits(f)
}

// applyLimits applies the negotiated narrower caps of f in StateActive.
func (rc *Receiver) applyLimits(f Frame) error {
	if rc.State != StateActive {
		return nil
	}
	if lc, ok := f.(limitChecked); ok {
		return lc.checkLimits(&rc.Limits)
	}
	return nil
}

// DecodeMessage decodes one frame from a message transport, where one
// message is exactly one frame: the declared length must equal the
// message length minus four ("envelope.length_mismatch",
// MALFORMED_MESSAGE), after the header rules of CheckHeader.
func (rc *Receiver) DecodeMessage(msg []byte) (Frame, error) {
	if len(msg) < 5 {
		if len(msg) == 4 && binary.BigEndian.Uint32(msg) == 0 {
			return nil, malformed("envelope.zero_length")
		}
		return nil, malformed("envelope.truncated")
	}
	length := binary.BigEndian.Uint32(msg)
	t := FrameType(msg[4])
	if err := rc.CheckHeader(length, t); err != nil {
		return nil, err
	}
	if uint64(length) != uint64(len(msg)-4) {
		return nil, malformed("envelope.length_mismatch")
	}
	return rc.DecodeBody(t, msg[5:])
}

// FrameReader reads frames from a byte stream that belongs to it. It is a
// buffered EnvelopeReader (NewBufferedEnvelopeReader): it reads ahead
// with reads as large as its bounded read-ahead, so frames that arrive
// together cost one read system call between them; it copies the 4-byte
// length and the type byte into fixed storage, applies
// Receiver.CheckHeader, and only then takes payload storage: a frame that
// fits in the read-ahead (every frame up to SmallPayloadBytes of payload)
// is returned in place, a longer one borrows a pooled buffer that goes
// back at the next read (or Release), so a connection's memory returns to
// its fixed read storage once the stream has caught up, after a large
// frame too. It is not safe for concurrent use.
type FrameReader struct {
	Receiver
	env EnvelopeReader
}

// NewFrameReader returns a reader in StateHandshake for the given role.
// It may read bytes of later frames from r: r must not be read by anyone
// else afterwards.
func NewFrameReader(r io.Reader, role Role) *FrameReader {
	return &FrameReader{Receiver: Receiver{Role: role, State: StateHandshake}, env: EnvelopeReader{r: r, buffered: true}}
}

// SetStep moves a reader in StateHandshake to handshake step s: from then
// on a frame type not legal at s is refused from its header
// (Receiver.Step).
func (fr *FrameReader) SetStep(s HandshakeStep) { fr.Step = s }

// Activate moves the reader to StateActive with the selected limits.
func (fr *FrameReader) Activate(l Limits) {
	fr.State = StateActive
	fr.Step = StepAny
	fr.Limits = l
}

// receiverRules adapts a Receiver to EnvelopeRules: length 0 is refused as
// soon as the length is read, the rest of CheckHeader once the type byte is
// read.
type receiverRules Receiver

func (rr *receiverRules) CheckLength(length uint32) error {
	if length == 0 {
		return malformed("envelope.zero_length")
	}
	return nil
}

func (rr *receiverRules) CheckType(length uint32, t byte) error {
	return (*Receiver)(rr).CheckHeader(length, FrameType(t))
}

// ReadRaw reads one frame and returns its type and body. The body is valid
// only until the next call of ReadRaw, ReadFrame or Release: it lies in
// the reader's read-ahead or in a pooled buffer, either of which is then
// reused or handed to other readers. A stream that ends cleanly before a frame starts returns
// io.EOF; one that ends inside a frame returns io.ErrUnexpectedEOF.
// Envelope refusals are *Error values, returned before any payload byte is
// read.
func (fr *FrameReader) ReadRaw() (FrameType, []byte, error) {
	t, body, err := fr.env.Next((*receiverRules)(&fr.Receiver))
	return FrameType(t), body, err
}

// ReadFrame reads and strictly decodes one frame. The returned frame does
// not alias the reader's buffer, so a pooled buffer is released at once.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	t, body, err := fr.ReadRaw()
	if err != nil {
		return nil, err
	}
	f, err := fr.DecodeBody(t, body)
	fr.env.Release()
	return f, err
}

// Release gives a pooled buffer holding the last body back before the
// next read; the body returned by the last ReadRaw is invalid afterwards.
// Calling it is optional: the next read releases it too.
func (fr *FrameReader) Release() { fr.env.Release() }

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// FrameWriter encodes frames into a reused buffer and writes each with one
// Write call. It refuses to send a frame over its cap (FRAME_TOO_LARGE
// "writer.over_frame_cap"). It is not safe for concurrent use.
type FrameWriter struct {
	w   io.Writer
	buf []byte
	// MaxFrameBytes caps the declared length of frames written; zero
	// means HandshakeMaxFrameBytes; set it to the selected MaxFrameBytes
	// after COORD_HELLO_OK.
	MaxFrameBytes uint32
}

// NewFrameWriter returns a writer capped at the handshake limit.
func NewFrameWriter(w io.Writer) *FrameWriter {
	return &FrameWriter{w: w, MaxFrameBytes: HandshakeMaxFrameBytes}
}

// WriteFrame encodes f and writes the whole frame.
func (fw *FrameWriter) WriteFrame(f Frame) error {
	fw.buf = AppendFrame(fw.buf[:0], f)
	max := fw.MaxFrameBytes
	if max == 0 {
		max = HandshakeMaxFrameBytes
	}
	if uint64(len(fw.buf)-4) > uint64(max) {
		return tooLarge("writer.over_frame_cap")
	}
	_, err := fw.w.Write(fw.buf)
	return err
}
