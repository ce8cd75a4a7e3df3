package execowner

import (
	"bytes"
	"testing"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// An executor document that decodes is canonical: it re-encodes to exactly
// its input (one meaning, one image).
func FuzzExecutor(f *testing.F) {
	for _, x := range []Executor{
		{Argv: []string{"sh", "-c", "echo hi"}},
		{Argv: []string{"env"}, HasEnv: true, Env: []string{"A=1", "B=2"}, Dir: "/tmp"},
		{Argv: []string{"true"}, HasEnv: true},
	} {
		f.Add(x.Append(nil))
	}
	f.Add(append((&Executor{Argv: []string{"true"}}).Append(nil), 3, 4, 0)) // a present empty dir
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := DecodeExecutor(b)
		if err != nil {
			if coordwire.CodeOf(err) != coordwire.MalformedMessage {
				t.Fatalf("refusal %v is not MALFORMED_MESSAGE", err)
			}
			return
		}
		if got := x.Append(nil); !bytes.Equal(got, b) {
			t.Fatalf("decoded %x re-encodes to %x", b, got)
		}
	})
}

// The socket protocol's decoders never panic, and a request or result that
// decodes re-encodes to exactly its body.
func FuzzProtocol(f *testing.F) {
	key := coordserver.EffectKey{ID: [16]byte{1}, Digest: [32]byte{2}}
	ref := coordwire.TerminalBindingRef{BindingID: [16]byte{3}, WorkSessionID: [16]byte{4}, OwnerIncarnation: [16]byte{5}, ResourceID: []byte("r")}
	f.Add(byte(opSpawn), appendSpawn(1, coordserver.SpawnRequest{Key: key, Group: []byte("g"), ExecutorDocument: []byte("d")}))
	f.Add(byte(opKill), appendEffect(2, key, ref))
	f.Add(byte(opSignal), append(appendEffect(3, key, ref), 1))
	f.Add(byte(opOutcome), appendKey(coordwire.AppendU32(nil, 4), key))
	f.Add(byte(opFactAck), append(coordwire.AppendU64(nil, 5), ackRetry))
	f.Add(byte(opResult), appendResult(6, stOK, coordserver.EffectOutcome{Kind: coordwire.EffectSpawn, Spawn: coordserver.SpawnResult{ResourceID: []byte("x")}}, ""))
	f.Add(byte(opHello), appendHello([32]byte{7}, coordwire.IncarnationID{8}, []byte("g")))
	f.Fuzz(func(t *testing.T, op byte, body []byte) {
		switch op {
		case opResult:
			r, err := decodeResult(body)
			if err == nil {
				if got := appendResult(r.req, r.status, r.out, r.reason); !bytes.Equal(got, body) {
					t.Fatalf("result %x re-encodes to %x", body, got)
				}
			}
		case opHello:
			decodeHello(body)
		case opFact:
			decodeFact(body)
		default:
			q, err := decodeRequest(op, body)
			if err != nil {
				return
			}
			var got []byte
			switch op {
			case opSpawn:
				got = appendSpawn(q.req, q.spawn)
			case opKill:
				got = appendEffect(q.req, q.key, q.ref)
			case opSignal:
				got = append(appendEffect(q.req, q.key, q.ref), byte(q.signal))
			case opOutcome:
				got = appendKey(coordwire.AppendU32(nil, q.req), q.key)
			case opFactAck:
				got = append(coordwire.AppendU64(nil, q.fact), q.ack)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("op %x body %x re-encodes to %x", op, body, got)
			}
		}
	})
}
