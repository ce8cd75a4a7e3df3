package execowner

import (
	"bytes"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
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

// Replaying any file either refuses it (ErrJournalCorrupt) or yields
// records that re-encode to a prefix of it (the rest was a torn tail).
func FuzzJournalReplay(f *testing.F) {
	intent := record{typ: recIntent, id: [16]byte{1}, digest: [32]byte{2}, kind: coordwire.EffectSpawn}
	result := intent
	result.typ, result.res = recResult, stored{resource: []byte("r")}
	img := []byte(journalMagic)
	for _, r := range []record{intent, result} {
		body := r.appendBody(nil)
		img = coordwire.AppendU32(img, uint32(len(body)))
		img = coordwire.AppendU32(img, crc32c(body))
		img = append(img, body...)
	}
	f.Add(img)
	f.Add(img[:len(img)-3])
	f.Add([]byte(journalMagic[:5]))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "j")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		j, recs, err := openJournal(path, DefaultMaxJournalBytes)
		if err != nil {
			if !errors.Is(err, ErrJournalCorrupt) {
				t.Fatalf("refusal %v is not ErrJournalCorrupt", err)
			}
			return
		}
		defer j.close()
		want := []byte(journalMagic)
		for i := range recs {
			body := recs[i].appendBody(nil)
			want = coordwire.AppendU32(want, uint32(len(body)))
			want = coordwire.AppendU32(want, crc32c(body))
			want = append(want, body...)
		}
		if len(b) >= len(journalMagic) && !bytes.HasPrefix(b, want) {
			t.Fatalf("records do not re-encode to a prefix of the file")
		}
		if j.size != int64(len(want)) {
			t.Fatalf("journal size %d, records end at %d", j.size, len(want))
		}
	})
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crcTable) }
