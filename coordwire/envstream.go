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
// A buffered reader (NewBufferedEnvelopeReader) needs no buffer of its
// own: every payload up to SmallPayloadBytes lies in its read-ahead.
const SmallPayloadBytes = HandshakeMaxFrameBytes

// The read-ahead of a buffered reader: idleReadBytes of fixed storage in
// the reader, read into whenever it holds no read-ahead buffer, and a
// pooled read-ahead buffer of readAheadBytes (the smallest large payload
// class, whose pool it shares) taken when a read filled the fixed storage
// (more is on the way) or a frame whose header passed the rules is longer
// than it, and given back as soon as every buffered byte is used and the
// last read did not fill the buffer (the stream caught up): an idle
// connection holds the fixed storage only.
const (
	idleReadBytes  = 512
	readAheadBytes = largeMin
)

// noProgressReads is how many reads in a row may return no byte and no
// error before a buffered reader gives up with io.ErrNoProgress (as
// bufio does).
const noProgressReads = 100

// EnvelopeReader reads envelopes from a byte stream: the length and type
// into fixed storage, the catalog's checks (EnvelopeRules), and only then
// the payload.
//
// A reader from NewEnvelopeReader reads exactly the bytes of one frame
// from the stream, with one read for the length, one for the type and one
// for the payload: the stream may be handed to another reader between
// frames. Payloads up to SmallPayloadBytes go into a buffer the reader
// keeps (grown to exactly the largest such payload seen).
//
// A reader from NewBufferedEnvelopeReader owns its stream and reads ahead:
// each read asks for as many bytes as its read-ahead holds, so frames that
// arrive together (a writer that gathers them into one write) cost one
// read between them. A payload that lies in the read-ahead is returned in
// place, without a copy; the read-ahead is bounded and independent of any
// declared length (see idleReadBytes), and the header's length and type
// are still copied into fixed storage and checked before any payload
// storage is taken.
//
// In both, a payload too large for the reader's own storage goes into a
// buffer borrowed from a process-wide pool of power-of-two size classes
// (32 KiB to 1 MiB), returned at the next Next or Release, so a reader
// retains at most SmallPayloadBytes (unbuffered) or its fixed read
// storage (buffered, once the stream caught up) between frames. A stream
// error other than EOF (a deadline, a reset) is returned as is, and the
// reader is then in an undefined position in the stream. The zero value is
// not usable; use NewEnvelopeReader or NewBufferedEnvelopeReader. It is
// not safe for concurrent use.
type EnvelopeReader struct {
	r     io.Reader
	hdr   [5]byte
	small []byte
	// large is the pooled buffer lent for the last payload above what
	// the reader's own storage holds, nil otherwise.
	large *[]byte

	// The read-ahead of a buffered reader: the unread bytes are
	// window()[rpos:wpos], the window being ahead while it is held and
	// idle otherwise.
	buffered   bool
	ahead      *[]byte // the pooled read-ahead buffer, while held
	rpos, wpos int
	filled     bool  // the last read filled the window to its end
	rerr       error // a read error behind the buffered bytes
	idle       [idleReadBytes]byte
}

// NewEnvelopeReader returns a reader of envelopes from r that reads no
// byte beyond the frame it returns.
func NewEnvelopeReader(r io.Reader) *EnvelopeReader { return &EnvelopeReader{r: r} }

// NewBufferedEnvelopeReader returns a reader of envelopes from r that
// reads ahead (see EnvelopeReader): r belongs to it.
func NewBufferedEnvelopeReader(r io.Reader) *EnvelopeReader {
	return &EnvelopeReader{r: r, buffered: true}
}

// Next releases the previous payload's buffer and reads one envelope. It
// returns the type byte and the payload (declared length minus one bytes),
// valid only until the next call of Next or Release. A stream that ends
// cleanly before the first length byte returns io.EOF; one that ends
// anywhere later returns io.ErrUnexpectedEOF. An error of rules is
// returned unchanged, before any further byte is read or any payload
// storage reserved (a buffered reader may already hold later bytes that
// arrived in the same read as the header; it reserves nothing for them).
// Length 0 has no type byte, so rules.CheckLength must refuse it; Next
// panics if it does not (a catalog bug, not peer input).
func (er *EnvelopeReader) Next(rules EnvelopeRules) (byte, []byte, error) {
	er.Release()
	if er.buffered {
		return er.nextBuffered(rules)
	}
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

// nextBuffered is Next of a buffered reader. The length and the type are
// copied into fixed storage (hdr) from the read-ahead and checked there,
// each as soon as its bytes are buffered: fill never reads once it holds
// the bytes asked for, so a refused header is refused without waiting for
// any later byte.
func (er *EnvelopeReader) nextBuffered(rules EnvelopeRules) (byte, []byte, error) {
	if err := er.fill(4); err != nil {
		if er.wpos > er.rpos {
			err = unexpected(err)
		}
		return 0, nil, err
	}
	copy(er.hdr[:4], er.window()[er.rpos:er.wpos])
	length := binary.BigEndian.Uint32(er.hdr[:4])
	if err := rules.CheckLength(length); err != nil {
		return 0, nil, err
	}
	if length == 0 {
		panic("coordwire: EnvelopeRules.CheckLength accepted length 0")
	}
	if err := er.fill(5); err != nil {
		return 0, nil, unexpected(err)
	}
	er.hdr[4] = er.window()[er.rpos+4]
	t := er.hdr[4]
	if err := rules.CheckType(length, t); err != nil {
		return 0, nil, err
	}
	n := int(length - 1)
	if 5+n <= readAheadBytes {
		// The whole frame fits in the read-ahead: the payload is
		// returned in place.
		if err := er.fill(5 + n); err != nil {
			return 0, nil, unexpected(err)
		}
		p := er.rpos + 5
		er.rpos = p + n
		return t, er.window()[p : p+n : p+n], nil
	}
	// Longer than the read-ahead: the bytes already buffered (all of
	// this frame's) are copied into pooled payload storage and the rest
	// is read straight into it, so nothing past the frame is read.
	body := er.payload(n)
	k := copy(body, er.window()[er.rpos+5:er.wpos])
	er.rpos, er.wpos, er.filled = 0, 0, false
	if err := er.rerr; err != nil {
		er.rerr = nil
		er.Release()
		return 0, nil, unexpected(err)
	}
	if _, err := io.ReadFull(er.r, body[k:]); err != nil {
		er.Release()
		return 0, nil, unexpected(err)
	}
	return t, body, nil
}

// window returns the read-ahead window: the pooled buffer while held,
// else the fixed storage.
func (er *EnvelopeReader) window() []byte {
	if er.ahead != nil {
		return *er.ahead
	}
	return er.idle[:]
}

// fill reads until at least k (at most readAheadBytes) unread bytes are
// buffered, with reads as large as the window's free space, and returns
// the read error behind the buffered bytes once they do not suffice. It
// takes the pooled read-ahead buffer when k exceeds the fixed storage or
// the last read filled the fixed storage.
func (er *EnvelopeReader) fill(k int) error {
	empty := 0
	for er.wpos-er.rpos < k {
		if err := er.rerr; err != nil {
			er.rerr = nil
			return err
		}
		if er.ahead == nil && (k > idleReadBytes || er.filled) {
			p, _ := largePools[0].Get().(*[]byte)
			if p == nil {
				b := make([]byte, readAheadBytes)
				p = &b
			}
			er.wpos = copy(*p, er.idle[er.rpos:er.wpos])
			er.rpos = 0
			er.ahead = p
		}
		w := er.window()
		if er.rpos > 0 {
			// The unread bytes (part of one frame) move to the front:
			// the frame then fits, and the read is as large as it can be.
			er.wpos = copy(w, w[er.rpos:er.wpos])
			er.rpos = 0
		}
		n, err := er.r.Read(w[er.wpos:])
		if n < 0 || n > len(w)-er.wpos {
			panic("coordwire: reader returned an invalid count")
		}
		er.wpos += n
		er.filled = er.wpos == len(w)
		switch {
		case err != nil:
			er.rerr = err
		case n > 0:
			empty = 0
		default:
			if empty++; empty == noProgressReads {
				er.rerr = io.ErrNoProgress
			}
		}
	}
	return nil
}

// Release returns a pooled buffer lent for the last payload; the payload
// returned by the last Next is invalid afterwards. A buffered reader that
// has used every buffered byte and whose last read did not fill its
// read-ahead (the stream caught up) also gives the read-ahead buffer
// back, so an idle connection holds only its fixed storage. It is
// optional (Next releases too) and idempotent.
func (er *EnvelopeReader) Release() {
	if er.large != nil {
		largePools[largeClass(cap(*er.large))].Put(er.large)
		er.large = nil
	}
	if er.ahead != nil && er.rpos == er.wpos && !er.filled {
		largePools[0].Put(er.ahead)
		er.ahead = nil
		er.rpos, er.wpos = 0, 0
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
// largeMin << i bytes for class i. Class 0 also holds the read-ahead
// buffers of buffered readers (readAheadBytes).
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

// A buffered reader returns every payload up to SmallPayloadBytes in
// place (its frame fits in the read-ahead), and its fixed storage holds a
// whole header.
var _ = [readAheadBytes - 5 - SmallPayloadBytes]struct{}{}
var _ = [idleReadBytes - 5]struct{}{}
