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
// fuzzSeedExecutor is the seed corpus of FuzzExecutor.
func fuzzSeedExecutor() [][]byte {
	var out [][]byte
	for _, x := range []Executor{
		{Argv: []string{"sh", "-c", "echo hi"}},
		{Argv: []string{"env"}, HasEnv: true, Env: []string{"A=1", "B=2"}, Dir: "/tmp"},
		{Argv: []string{"true"}, HasEnv: true},
	} {
		out = append(out, x.Append(nil))
	}
	out = append(out, append((&Executor{Argv: []string{"true"}}).Append(nil), 3, 4, 0)) // a present empty dir
	return out
}

func FuzzExecutor(f *testing.F) {
	for _, b := range fuzzSeedExecutor() {
		f.Add(b)
	}
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
// protoSeed is one FuzzProtocol input.
type protoSeed struct {
	op   byte
	body []byte
}

// fuzzSeedProtocol is the seed corpus of FuzzProtocol.
func fuzzSeedProtocol() []protoSeed {
	var out []protoSeed
	key := coordserver.EffectKey{ID: [16]byte{1}, Digest: [32]byte{2}}
	ref := coordwire.TerminalBindingRef{BindingID: [16]byte{3}, WorkSessionID: [16]byte{4}, OwnerIncarnation: [16]byte{5}, ResourceID: []byte("r")}
	out = append(out, protoSeed{byte(opSpawn), appendSpawn(1, coordserver.SpawnRequest{Key: key, Group: []byte("g"), ExecutorDocument: []byte("d")})})
	out = append(out, protoSeed{byte(opKill), appendEffect(2, key, ref)})
	out = append(out, protoSeed{byte(opSignal), append(appendEffect(3, key, ref), 1)})
	out = append(out, protoSeed{byte(opOutcome), appendKey(coordwire.AppendU32(nil, 4), key)})
	out = append(out, protoSeed{byte(opFactAck), append(coordwire.AppendU64(nil, 5), ackRetry)})
	out = append(out, protoSeed{byte(opFactAck), append(coordwire.AppendU64(nil, 6), ackEnded)})
	out = append(out, protoSeed{byte(opResult), appendResult(6, stOK, coordserver.EffectOutcome{Kind: coordwire.EffectSpawn, Spawn: coordserver.SpawnResult{ResourceID: []byte("x")}}, "")})
	out = append(out, protoSeed{byte(opHello), appendHello([32]byte{7}, coordwire.IncarnationID{8}, []byte("g"))})
	return out
}

func FuzzProtocol(f *testing.F) {
	for _, p := range fuzzSeedProtocol() {
		f.Add(p.op, p.body)
	}
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
// fuzzSeedJournal is the seed corpus of FuzzJournalReplay: a journal of
// an intent and its result, the same with a torn tail, and a torn magic.
func fuzzSeedJournal() [][]byte {
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
	return [][]byte{img, img[:len(img)-3], []byte(journalMagic[:5])}
}

func FuzzJournalReplay(f *testing.F) {
	for _, b := range fuzzSeedJournal() {
		f.Add(b)
	}
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

// TestFuzzSeedsDecode checks the seed corpora of FuzzExecutor,
// FuzzProtocol and FuzzJournalReplay: each holds inputs its decoder
// accepts (so mutation starts inside the decoder), and the executor and
// journal corpora also hold one it refuses or truncates.
func TestFuzzSeedsDecode(t *testing.T) {
	ok, refused := 0, 0
	for _, b := range fuzzSeedExecutor() {
		if _, err := DecodeExecutor(b); err == nil {
			ok++
		} else {
			refused++
		}
	}
	if ok == 0 || refused == 0 {
		t.Errorf("FuzzExecutor seeds: %d accepted, %d refused; want at least one of each", ok, refused)
	}
	for _, p := range fuzzSeedProtocol() {
		var err error
		switch p.op {
		case opResult:
			_, err = decodeResult(p.body)
		case opHello:
			_, err = decodeHello(p.body)
		default:
			_, err = decodeRequest(p.op, p.body)
		}
		if err != nil {
			t.Errorf("FuzzProtocol seed op %#x does not decode: %v", p.op, err)
		}
	}
	var counts []int
	for _, b := range fuzzSeedJournal() {
		path := filepath.Join(t.TempDir(), "j")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		j, recs, err := openJournal(path, DefaultMaxJournalBytes)
		if err != nil {
			counts = append(counts, -1)
			continue
		}
		j.close()
		counts = append(counts, len(recs))
	}
	if len(counts) != 3 || counts[0] != 2 || counts[1] != 1 {
		t.Errorf("FuzzJournalReplay seeds replay to %v records; want 2 (whole), 1 (torn tail), then the torn magic", counts)
	}
}
