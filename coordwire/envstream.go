package coordwire

import (
	"encoding/binary"
	"io"
	"math/bits"
	"sync"
)

// EnvelopeRules is a frame catalog's part in reading an envelope
// u32_be length || u8 type || payload: it decides, from the header alone,
// whether a frame is acceptable, and returns the refusal in the catalog's
// own error type. coordwire's FrameReader and the phux-witness/1 reader
// share EnvelopeReader with their own rules.
type EnvelopeRules interface {
	// CheckLength is called with the declared length (type byte plus
	// payload) as soon as its four bytes are read, before the type byte
	// is read. A non-nil error ends the read.
	CheckLength(length uint32) error
	// CheckType is called with the declared length and the type byte,
	// before any payload byte is read or reserved: type legality and the
	// catalog's caps. A non-nil error ends the read. The length is
	// never 0 here unless CheckLength accepted 0.
	CheckType(length uint32, t byte) error
}

// SmallPayloadBytes is the payload size up to which an EnvelopeReader
// keeps its own buffer: every handshake frame (the 16 KiB handshake cap)
// and the typical active frame. Larger payloads, up to the 1 MiB hard cap,
// borrow a pooled buffer that is returned at the next read or Release.
const SmallPayloadBytes = HandshakeMaxFrameBytes

// EnvelopeReader reads envelopes from a byte stream: the length and type
// into fixed storage, the catalog's checks (EnvelopeRules), and only then
// the payload. Payloads up to SmallPayloadBytes go into a buffer the
// reader keeps (grown to exactly the largest such payload seen); larger
// ones into a buffer borrowed from a process-wide pool of power-of-two size
// classes (32 KiB to 1 MiB), returned at the next Next or Release, so a
// reader retains at most SmallPayloadBytes between frames. A stream error
// other than EOF (a deadline, a reset) is returned as is, and the reader
// is then in an undefined position in the stream. The zero value is not usable;
// use NewEnvelopeReader. It is not safe for concurrent use.
type EnvelopeReader struct {
	r     io.Reader
	hdr   [5]byte
	small []byte
	// large is the pooled buffer lent for the last payload above
	// SmallPayloadBytes, nil otherwise.
	large *[]byte
}

// NewEnvelopeReader returns a reader of envelopes from r.
func NewEnvelopeReader(r io.Reader) *EnvelopeReader { return &EnvelopeReader{r: r} }

// Next releases the previous payload's buffer and reads one envelope. It
// returns the type byte and the payload (declared length minus one bytes),
// valid only until the next call of Next or Release. A stream that ends
// cleanly before the first length byte returns io.EOF; one that ends
// anywhere later returns io.ErrUnexpectedEOF. An error of rules is
// returned unchanged, before any further byte is read or any payload
// storage reserved. Length 0 has no type byte, so rules.CheckLength must
// refuse it; Next panics if it does not (a catalog bug, not peer input).
func (er *EnvelopeReader) Next(rules EnvelopeRules) (byte, []byte, error) {
	er.Release()
	if _, err := io.ReadFull(er.r, er.hdr[:4]); err != nil {
		return 0, nil, err
	}
	length := binary.BigEndian.Uint32(er.hdr[:4])
	if err := rules.CheckLength(length); err != nil {
		return 0, nil, err
	}
	if length == 0 {
		panic("coordwire: EnvelopeRules.CheckLength accepted length 0")
	}
	if _, err := io.ReadFull(er.r, er.hdr[4:5]); err != nil {
		return 0, nil, unexpected(err)
	}
	t := er.hdr[4]
	if err := rules.CheckType(length, t); err != nil {
		return 0, nil, err
	}
	body := er.payload(int(length - 1))
	if _, err := io.ReadFull(er.r, body); err != nil {
		er.Release()
		return 0, nil, unexpected(err)
	}
	return t, body, nil
}

// Release returns a pooled buffer lent for the last payload; the payload
// returned by the last Next is invalid afterwards. It is optional (Next
// releases too) and idempotent.
func (er *EnvelopeReader) Release() {
	if er.large != nil {
		largePools[largeClass(cap(*er.large))].Put(er.large)
		er.large = nil
	}
}

// payload returns n bytes of storage for the next payload.
func (er *EnvelopeReader) payload(n int) []byte {
	if n <= SmallPayloadBytes {
		if cap(er.small) < n {
			// Exactly n: a reader never reserves more than the
			// largest length it accepted (FuzzEnvelope checks it).
			er.small = make([]byte, n)
		}
		return er.small[:n]
	}
	c := largeClass(n)
	p, _ := largePools[c].Get().(*[]byte)
	if p == nil {
		b := make([]byte, largeMin<<c)
		p = &b
	}
	er.large = p
	return (*p)[:n]
}

// largeMin is the smallest pooled size class (32 KiB, 1<<largeShift);
// classes double up to HardMaxFrameBytes (class largeClasses-1).
const (
	largeShift   = 15
	largeMin     = 1 << largeShift
	largeClasses = 20 - largeShift + 1
)

// largePools holds the pooled payload buffers, one pool per size class:
// largeMin << i bytes for class i.
var largePools [largeClasses]sync.Pool

// largeClass returns the size class holding n (SmallPayloadBytes < n <
// HardMaxFrameBytes) bytes.
func largeClass(n int) int {
	c := bits.Len(uint(n-1)) - largeShift
	return max(c, 0)
}

// The size classes must cover exactly SmallPayloadBytes < n < HardMaxFrameBytes.
var _ = [1]struct{}{}[largeMin-2*SmallPayloadBytes]
var _ = [1]struct{}{}[largeMin<<(largeClasses-1)-HardMaxFrameBytes]
