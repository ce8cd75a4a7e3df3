package witness_test

import (
	"crypto/ed25519"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

// byteCount matches every "<number> bytes" / "<number>-byte" statement
// (and ranges "1..4,096 bytes") in docs/.
var byteCount = regexp.MustCompile(`(\d[\d,]*)(?:\.\.(\d[\d,]*))?(?:\s+|-)bytes?\b`)

// docSizes are the byte counts docs/ states that an encoder or a
// constant of the code determines: file, a phrase whose first group is
// the number, and the length the code gives. Each phrase must occur.
var docSizes = []struct {
	file, phrase string
	want         int
}{
	{"witness-protocol.md", `ActivationCertificate image \((\d[\d,]*) bytes, §12\)`,
		len((&coordwire.ActivationCertificate{}).Append(nil))},
	{"witness-protocol.md", `message: str ≤ (\d[\d,]*) bytes`, witness.MaxMessageBytes},
	{"witness-protocol.md", `fresh (\d+)-byte nonce`, len(witness.Hello{}.Nonce.Reveal())},
	{"witness-protocol.md", `random\s+(\d+)-byte fencing token`, len(witness.Request{}.FencingToken.Reveal())},
	{"witness-protocol.md", `for a (\d+)-byte secret`, len(witness.Request{}.HolderSecret.Reveal())},
	{"witness-protocol.md", `image is (\d[\d,]*) bytes with no lease and no spent tokens`, stateRecordBytes(false, 0)},
	{"witness-protocol.md", `and at most (\d[\d,]*) bytes \(with a lease and 16 spent tokens\)`, stateRecordBytes(true, 16)},
	{"witness-protocol.md", `an empty state file is (\d[\d,]*) bytes`, emptyStateBytes()},
	{"semantics.md", `longer than (\d+) bytes or overflowing 64 bits`, binary.MaxVarintLen64},
	{"semantics.md", `64 preconditions \((\d[\d,]*) bytes\)`, coordwire.MaxPreconditions * coordwire.PreconditionSize},
	{"semantics.md", `including the (\d+)-byte length`, frameHeader() - 1},
	{"semantics.md", `raw (\d+)-byte key`, ed25519.PublicKeySize},
	{"semantics.md", `only the (\d+)-byte header`, frameHeader()},
	{"semantics.md", `\*\*Signal message ≤ (\d[\d,]*) bytes\*\*`, coordwire.MaxDiagnosticBytes},
	{"semantics.md", `\*\*A REJECTED message is ≤ (\d[\d,]*) bytes\*\*`, coordwire.MaxDiagnosticBytes},
	{"semantics.md", `images of 1\.\.(\d[\d,]*) bytes`, coordwire.MaxResourceIDBytes},
	{"semantics.md", `PENDING_SPAWN\) is 1\.\.(\d[\d,]*) bytes`, coordwire.MaxResourceIDBytes},
	{"semantics.md", `WitnessPublicKey.{3}raw (\d+) bytes`, ed25519.PublicKeySize},
	{"witness-protocol.md", `(\d+)-byte Ed25519 key printed by`, ed25519.PublicKeySize},
	{"semantics.md", `effective uid, exactly (\d+)\s+bytes`, ed25519.SeedSize},
	{"semantics.md", `including the (\d+)-byte prefix`, frameHeader() - 1},
	{"semantics.md", `plus\s+(\d+) bytes \(an ObjectRef\)`, coordwire.ObjectRefSize},
}

// notImageSizes are the byte-count statements in docs/ that are caps or
// limits decided elsewhere (and tested by their packages), not sizes an
// encoder produces: file, phrase, why.
var notImageSizes = []struct{ file, phrase, why string }{
	{"ffi-cost.md", `the header from at most 64 bytes of the next`, "how much of the next chunk the Node bench driver reads for a straddling header (ffi/libphuxcoord/testdata/bridgebench.js), checked by its warm-up"},
	{"ffi.md", `a header line over 1024\s+bytes`, "the bridge's bound on one header line (coordffi's maxHeaderLine), tested by TestBridgeUnframedInputEndsTheStream"},
	{"ffi.md", `the raw 32-byte seed`, "the workload key seed (coordclient.SeedSize), refused otherwise by the C ABI tests"},
	{"semantics.md", `manifest media type 1\.\.255 bytes`, "a decoder cap on a string field"},
	{"semantics.md", `locator absent or 1\.\.4,096 bytes`, "a decoder cap on a string field"},
	{"semantics.md", `notes are ≤ 1,024 bytes`, "a decoder cap on a string field"},
	{"semantics.md", `service string ≤ 64 bytes`, "a handshake decoder cap"},
	{"semantics.md", `source-fact payload ≤ 56 bytes`, "a payload cap (coordwire's own tests)"},
	{"semantics.md", `effect payload ≤ 22 bytes`, "a payload cap (coordwire's own tests)"},
	{"semantics.md", `A cursor is 32 bytes from crypto/rand`, "the server's cursor length, a choice below the 4 KiB cap (coordserver tests)"},
	{"semantics.md", `by 256 bytes and 10 s`, "the key tool's read bound on a public-key file (cmd/phux-coordkey tests)"},
	{"semantics.md", `UTF-8 of at most 1,024 bytes`, "the server's bound on its own signal messages (core tests)"},
	{"semantics.md", `200-byte objects \(64 writers`, "the object size of a boltstore benchmark (BenchmarkHeldCutPins), quoted with its measurement"},
	{"semantics.md", `cut to 1,024 bytes of valid UTF-8`, "the bound on an owner's rejection reason in the operation message (core tests)"},
	{"semantics.md", `reads\s+ahead into 512 bytes of fixed storage`, "the buffered envelope reader's fixed read storage, a buffer size (coordwire's envbuffer tests)"},
}

func frameHeader() int {
	f := &witness.AdminOK{}
	return len(witness.AppendFrame(nil, f)) - len(f.AppendBody(nil))
}

// stateRecordBytes is the encoded size of one state-file record.
func stateRecordBytes(lease bool, spent int) int {
	n := 16 + 1 + 32 + 8 + 8 + 1 + 8 + 1 + 2 + spent*(32+1)
	if lease {
		n += 32 + 32 + 16 + 8 + 8 + 8
	}
	return n
}

// emptyStateBytes is the size of a freshly initialised state file,
// measured on one.
func emptyStateBytes() int {
	dir, err := os.MkdirTemp("", "pwdoc")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if _, err := witness.Init(filepath.Join(dir, "s")); err != nil {
		panic(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "s", witness.StateFileName))
	if err != nil {
		panic(err)
	}
	return len(b)
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Finding 8.9: every byte count stated in docs/ matches the code (the
// ActivationCertificate image once said 241 bytes; it is 209), and every
// "<number> bytes" statement is either checked here or explicitly listed
// as a cap that is not an image size — so a new wrong count fails.
func TestDocByteCounts(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	// The state record size this test derives agrees with the encoder.
	if got := len(stateImageWithRecords(t)); got != emptyStateBytes()+stateRecordBytes(false, 0) {
		t.Fatalf("state record size: file grows by %d, derived %d", got-emptyStateBytes(), stateRecordBytes(false, 0))
	}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text, name := string(b), filepath.Base(path)
		if name == "semantics-index.md" {
			continue // generated: it quotes semantics.md's leads, checked there
		}
		if name == "performance.md" {
			continue // measurements: its byte counts are the workloads' sizes, set by each figure's command
		}
		covered := make([]bool, len(text))
		cover := func(loc []int) {
			for i := loc[0]; i < loc[1]; i++ {
				covered[i] = true
			}
		}
		for _, d := range docSizes {
			if d.file != name {
				continue
			}
			locs := regexp.MustCompile(d.phrase).FindAllStringSubmatchIndex(text, -1)
			if len(locs) == 0 {
				t.Errorf("%s: no statement %q (the doc changed; update the table)", name, d.phrase)
			}
			for _, loc := range locs {
				if got := atoi(t, text[loc[2]:loc[3]]); got != d.want {
					t.Errorf("%s: %q says %d, the code gives %d", name, text[loc[0]:loc[1]], got, d.want)
				}
				cover(loc)
			}
		}
		for _, n := range notImageSizes {
			if n.file != name {
				continue
			}
			locs := regexp.MustCompile(n.phrase).FindAllStringIndex(text, -1)
			if len(locs) == 0 {
				t.Errorf("%s: listed statement %q is gone; remove it from notImageSizes", name, n.phrase)
			}
			for _, loc := range locs {
				cover(loc)
			}
		}
		for _, loc := range byteCount.FindAllStringIndex(text, -1) {
			if !covered[loc[0]] {
				line := 1 + strings.Count(text[:loc[0]], "\n")
				t.Errorf("%s:%d: %q is neither checked against the code (docSizes) nor listed as a cap (notImageSizes)",
					name, line, text[loc[0]:loc[1]])
			}
		}
	}
}

// stateImageWithRecords returns a state file holding one record that
// never activated (enrolled through the admin socket).
func stateImageWithRecords(t *testing.T) []byte {
	tw := startWitness(t, witness.Config{})
	if err := tw.adminClient(t, coordwire.NewCoordinatorID()).Enrol(ctxT(t), [32]byte{1}); err != nil {
		t.Fatal(err)
	}
	return stateBytes(t, tw)
}
