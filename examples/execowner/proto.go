package execowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// The socket protocol between cmd/execowner and Dial ("phux-execowner/1"),
// on a Unix stream socket. Every frame is
//
//	u32 len || u8 op || body          1 <= len <= MaxFrameBytes
//
// and every body is positional big-endian (coordwire's PosReader rules:
// u32-length bytes and strings, no trailing bytes). The server speaks
// first:
//
//	0x80 HELLO    magic[16]="phux-execowner/1" || fingerprint[32] ||
//	              incarnation[16] || u32 len group
//
// Client to server, each with a nonzero request id echoed by RESULT:
//
//	0x01 SPAWN    u32 req || id[16] || digest[32] || binding[16] ||
//	              work_session[16] || u32 len group || u16 schema || u32 len document
//	0x02 KILL     u32 req || id[16] || digest[32] || u32 len TerminalBindingRef
//	0x03 SIGNAL   u32 req || id[16] || digest[32] || u32 len TerminalBindingRef || u8 signal
//	0x04 OUTCOME  u32 req || id[16] || digest[32]
//	0x05 FACT_ACK u64 fact || u8 status (0 admitted, 1 refused for good, 2 retry,
//	              3 refused: the binding has ended, REVISION_CONFLICT
//	              "source.binding_ended")
//
// Server to client:
//
//	0x81 RESULT   u32 req || u8 status || body
//	              0 ok:         u8 kind || u8 rejected || u32 len reason || u32 len resource_id
//	              1 conflict, 2 unprovable, 3 unknown: empty
//	              4 error:      u32 len reason (a constant such as "journal.full")
//	0x82 FACT     u64 fact || u32 len TerminalSourceFact
//
// A frame over the bound, a truncated frame, an unknown op, a body that
// does not decode exactly or a FACT_ACK for a fact never sent closes the
// connection; nothing of a refused frame is acted on.

// MaxFrameBytes bounds a frame of the execowner socket protocol (a SPAWN
// with the largest executor document fits).
const MaxFrameBytes = 1 + 4 + 16 + 32 + 16 + 16 + 4 + coordwire.MaxResourceIDBytes + 2 + 4 + coordwire.MaxDocumentBytes

const protoMagic = "phux-execowner/1"

const (
	opSpawn   = 0x01
	opKill    = 0x02
	opSignal  = 0x03
	opOutcome = 0x04
	opFactAck = 0x05
	opHello   = 0x80
	opResult  = 0x81
	opFact    = 0x82
)

const (
	stOK = iota
	stConflict
	stUnprovable
	stUnknown
	stError
)

const (
	ackAdmitted = 0
	ackRefused  = 1
	ackRetry    = 2
	ackEnded    = 3
)

// ErrProtocol is returned (wrapped) for a frame that breaks the protocol.
var ErrProtocol = errors.New("execowner: protocol violation")

// readFrame reads one frame, refusing a length over max before reading
// the body.
func readFrame(r io.Reader, max int) (op byte, body []byte, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || uint64(n) > uint64(max) {
		return 0, nil, fmt.Errorf("%w: frame length %d", ErrProtocol, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, fmt.Errorf("%w: truncated frame: %v", ErrProtocol, err)
	}
	return buf[0], buf[1:], nil
}

// frame returns len || op || body with room reserved for the header.
func frame(op byte, body []byte) []byte {
	b := make([]byte, 5, 5+len(body))
	binary.BigEndian.PutUint32(b, uint32(1+len(body)))
	b[4] = op
	return append(b, body...)
}

// request is a decoded client request.
type request struct {
	op     byte
	req    uint32
	key    coordserver.EffectKey
	spawn  coordserver.SpawnRequest
	ref    coordwire.TerminalBindingRef
	signal coordwire.ProcessSignal
	fact   uint64
	ack    byte
}

func appendKey(b []byte, k coordserver.EffectKey) []byte {
	b = append(b, k.ID[:]...)
	return append(b, k.Digest[:]...)
}

func appendSpawn(req uint32, s coordserver.SpawnRequest) []byte {
	b := coordwire.AppendU32(nil, req)
	b = appendKey(b, s.Key)
	b = append(b, s.PendingBinding[:]...)
	b = append(b, s.WorkSession[:]...)
	b = coordwire.AppendLenPrefixed(b, s.Group)
	b = coordwire.AppendU16(b, s.ExecutorSchema)
	return coordwire.AppendLenPrefixed(b, s.ExecutorDocument)
}

func appendEffect(req uint32, k coordserver.EffectKey, ref coordwire.TerminalBindingRef) []byte {
	b := coordwire.AppendU32(nil, req)
	b = appendKey(b, k)
	return coordwire.AppendLenPrefixed(b, ref.Append(nil))
}

func decodeRequest(op byte, body []byte) (request, error) {
	q := request{op: op}
	r := coordwire.NewPosReader(body)
	readKey := func() {
		q.key.ID = r.Bytes16()
		q.key.Digest = r.Bytes32()
	}
	readRef := func() {
		img := r.LenPrefixed(maxRefBytes)
		if r.Err() == nil {
			if err := q.ref.Decode(img); err != nil {
				r.Fail(err)
			}
		}
	}
	switch op {
	case opSpawn, opKill, opSignal, opOutcome:
		q.req = r.U32()
		if r.Err() == nil && q.req == 0 {
			return q, fmt.Errorf("%w: request id zero", ErrProtocol)
		}
		readKey()
	}
	switch op {
	case opSpawn:
		q.spawn.Key = q.key
		q.spawn.PendingBinding = r.Bytes16()
		q.spawn.WorkSession = r.Bytes16()
		q.spawn.Group = r.Bytes(nil, coordwire.MaxResourceIDBytes)
		q.spawn.ExecutorSchema = r.U16()
		q.spawn.ExecutorDocument = r.Bytes(nil, coordwire.MaxDocumentBytes)
	case opKill:
		readRef()
	case opSignal:
		readRef()
		q.signal = coordwire.ProcessSignal(r.U8())
		if r.Err() == nil && !q.signal.Valid() {
			return q, fmt.Errorf("%w: signal", ErrProtocol)
		}
	case opOutcome:
	case opFactAck:
		q.fact = r.U64()
		q.ack = r.U8()
		if r.Err() == nil && q.ack > ackEnded {
			return q, fmt.Errorf("%w: ack status", ErrProtocol)
		}
	default:
		return q, fmt.Errorf("%w: unknown op 0x%02x", ErrProtocol, op)
	}
	if err := r.End(); err != nil {
		return q, fmt.Errorf("%w: op 0x%02x: %v", ErrProtocol, op, err)
	}
	return q, nil
}

// result is a decoded RESULT.
type result struct {
	req    uint32
	status byte
	out    coordserver.EffectOutcome
	reason string
}

func appendResult(req uint32, status byte, out coordserver.EffectOutcome, reason string) []byte {
	b := coordwire.AppendU32(nil, req)
	b = append(b, status)
	switch status {
	case stOK:
		rej, why, res := out.Effect.Rejected, out.Effect.Reason, []byte(nil)
		if out.Kind == coordwire.EffectSpawn {
			rej, why, res = out.Spawn.Rejected, out.Spawn.Reason, out.Spawn.ResourceID
		}
		b = append(b, byte(out.Kind))
		if rej {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = coordwire.AppendLenPrefixedStr(b, why)
		b = coordwire.AppendLenPrefixed(b, res)
	case stError:
		b = coordwire.AppendLenPrefixedStr(b, reason)
	}
	return b
}

func decodeResult(body []byte) (result, error) {
	var q result
	r := coordwire.NewPosReader(body)
	q.req = r.U32()
	q.status = r.U8()
	switch {
	case r.Err() != nil:
	case q.status == stOK:
		q.out.Kind = coordwire.EffectKind(r.U8())
		rej := r.Bool()
		why := r.Str(MaxReasonBytes)
		res := r.Bytes(nil, coordwire.MaxResourceIDBytes)
		if r.Err() == nil && !q.out.Kind.Valid() {
			return q, fmt.Errorf("%w: effect kind", ErrProtocol)
		}
		if len(res) == 0 {
			res = nil
		}
		if q.out.Kind == coordwire.EffectSpawn {
			q.out.Spawn = coordserver.SpawnResult{Rejected: rej, Reason: why, ResourceID: res}
		} else if res != nil {
			return q, fmt.Errorf("%w: resource id on a %v result", ErrProtocol, q.out.Kind)
		} else {
			q.out.Effect = coordserver.EffectResult{Rejected: rej, Reason: why}
		}
	case q.status == stError:
		q.reason = r.Str(MaxReasonBytes)
	case q.status > stError:
		return q, fmt.Errorf("%w: result status", ErrProtocol)
	}
	if err := r.End(); err != nil {
		return q, fmt.Errorf("%w: result: %v", ErrProtocol, err)
	}
	return q, nil
}

// remote errors: the constant reason of a stError RESULT and back.
var remoteErrors = []struct {
	reason string
	err    error
}{
	{"journal.full", ErrJournalFull},
	{"journal.failed", ErrJournalFailed},
	{"owner.closed", ErrClosed},
}

func errorReason(err error) string {
	for _, e := range remoteErrors {
		if errors.Is(err, e.err) {
			return e.reason
		}
	}
	var ce *coordwire.Error
	if errors.As(err, &ce) && len(ce.Reason) <= MaxReasonBytes && utf8.ValidString(ce.Reason) {
		return ce.Reason
	}
	return "internal"
}

// RemoteError is an error the execowner process answered that is not one
// of the dedupe sentinels; errors.Is matches ErrJournalFull,
// ErrJournalFailed and ErrClosed by their reasons.
type RemoteError struct{ Reason string }

func (e *RemoteError) Error() string { return "execowner: remote: " + e.Reason }

// Is matches the sentinel the reason stands for.
func (e *RemoteError) Is(target error) bool {
	for _, r := range remoteErrors {
		if r.err == target {
			return r.reason == e.Reason
		}
	}
	return false
}

func appendHello(fp [32]byte, inc coordwire.IncarnationID, group []byte) []byte {
	b := append([]byte(protoMagic), fp[:]...)
	b = append(b, inc[:]...)
	return coordwire.AppendLenPrefixed(b, group)
}

type hello struct {
	fp    [32]byte
	inc   coordwire.IncarnationID
	group []byte
}

func decodeHello(body []byte) (hello, error) {
	var h hello
	r := coordwire.NewPosReader(body)
	magic := r.Take(len(protoMagic))
	h.fp = r.Bytes32()
	h.inc = r.ID16()
	h.group = r.Bytes(nil, coordwire.MaxResourceIDBytes)
	if err := r.End(); err != nil {
		return h, fmt.Errorf("%w: hello: %v", ErrProtocol, err)
	}
	if string(magic) != protoMagic {
		return h, fmt.Errorf("%w: not an execowner socket", ErrProtocol)
	}
	return h, nil
}

func appendFact(n uint64, f *coordwire.TerminalSourceFact) []byte {
	return coordwire.AppendLenPrefixed(coordwire.AppendU64(nil, n), f.Append(nil))
}

func decodeFact(body []byte) (uint64, coordwire.TerminalSourceFact, error) {
	var f coordwire.TerminalSourceFact
	r := coordwire.NewPosReader(body)
	n := r.U64()
	img := r.LenPrefixed(coordwire.TerminalSourceRefSize + 2 + 2 + 4 + 64)
	if err := r.End(); err != nil {
		return 0, f, fmt.Errorf("%w: fact: %v", ErrProtocol, err)
	}
	if err := f.Decode(img); err != nil {
		return 0, f, fmt.Errorf("%w: fact: %v", ErrProtocol, err)
	}
	return n, f, nil
}

// maxRefBytes bounds a TerminalBindingRef image.
const maxRefBytes = 16 + 16 + 32 + 16 + 4 + coordwire.MaxResourceIDBytes
