// Package vectors builds, writes and checks the conformance vectors of
// coordinator protocol 0.1.0 (ADDENDUM C.11).
//
// The vectors are VectorFile messages (vectors.proto, generated Go code in
// package vectorspb) written as JSON by protojson with UseProtoNames and a
// stable two-space indentation, one file per family:
//
//	frames.json        one valid frame per frame type, every decoder and
//	                   envelope refusal, every frame type in every
//	                   handshake step, a terminal-protocol HELLO, snapshot
//	                   and replay page sequences
//	digests.json       operation, snapshot, replay and effect digests
//	certificates.json  activation certificates (package coordwire/cert)
//	auth.json          Ed25519 signatures (coordwire/edstrict), workload
//	                   transcripts, grants and scopes (workload)
//	rules.json         an invalid vector for every decoder rule in every
//	                   place it applies (rule/<rule>/<place>), the valid
//	                   values they mutate, negotiation and HELLO_OK cases
//	exchanges.json     snapshot and replay exchanges recorded from the real
//	                   server (package coordserver) over a Unix socket, and
//	                   one invalid exchange per rule of ExchangeRules
//	effects.json       effect digests and EffectAttempt images of every
//	                   effect kind, target and signal, TerminalSourceFact
//	                   images of every fact kind, SOURCE_GAP payloads,
//	                   evidence seals (clean,
//	                   gapped, conflicted), each with its invalid cases
//
// Generate builds every file in memory, deterministically: IDs, nonces and
// keys derive from SHA-256 of fixed published strings (see ID and Bytes32),
// never from a random source. The exchanges are recorded from a real
// server whose random sources (Config.Rand) are a SHA-256 stream of a
// published label and whose clock is frozen (vectors/internal/exchange). `go run ./vectors/cmd/genvectors` writes the
// files, and a test fails when the committed files differ from Generate's
// output.
//
// Check runs every vector of a file through this module's codec and
// primitives; ports and tools can reuse it, and `go run
// ./vectors/cmd/checkvectors FILE...` runs it from the command line.
package vectors

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// Format and Protocol are the format and protocol strings of every
// VectorFile (ADDENDUM C.11).
const (
	Format   = "phux-coordinator-vectors/1"
	Protocol = "0.1.0"
)

// SpeccheckPath is the module-relative path of the ed25519-speccheck case
// file the signature vectors are built from.
const SpeccheckPath = "coordwire/edstrict/testdata/ed25519-speccheck-cases.json"

// Inputs are the external inputs of Generate.
type Inputs struct {
	// SpeccheckJSON is the content of the file at SpeccheckPath.
	SpeccheckJSON []byte
}

// File is one generated vector file.
type File struct {
	// Name is the file name inside the vectors directory, e.g. "frames.json".
	Name string
	// Vectors is the file's content.
	Vectors *vectorspb.VectorFile
}

// ID returns the 16-byte vector ID for label: the first 16 bytes of
// SHA-256("phux-coordinator-vectors/id/" + label). It is never all zero
// for the labels used here (Generate checks every frame it builds).
func ID(label string) [16]byte {
	h := sha256.Sum256([]byte("phux-coordinator-vectors/id/" + label))
	var id [16]byte
	copy(id[:], h[:16])
	return id
}

// Bytes32 returns the 32 vector bytes for label:
// SHA-256("phux-coordinator-vectors/bytes/" + label). Nonces, fingerprints,
// key ids and token hashes of the vectors come from it.
func Bytes32(label string) [32]byte {
	return sha256.Sum256([]byte("phux-coordinator-vectors/bytes/" + label))
}

// Generate builds every vector file, deterministically. The files are
// returned in a fixed order; every vector name is unique across all files.
func Generate(in Inputs) ([]File, error) {
	var out []File
	seen := map[string]string{}
	for _, b := range []struct {
		name  string
		build func(*builder, Inputs)
	}{
		{"frames.json", buildFrames},
		{"digests.json", buildDigests},
		{"certificates.json", buildCertificates},
		{"auth.json", buildAuth},
		{"rules.json", buildRules},
		{"exchanges.json", buildExchanges},
		{"effects.json", buildEffects},
	} {
		g := &builder{}
		b.build(g, in)
		if g.err != nil {
			return nil, fmt.Errorf("vectors: %s: %w", b.name, g.err)
		}
		for _, v := range g.vs {
			if f, dup := seen[v.Name]; dup {
				return nil, fmt.Errorf("vectors: vector name %q in both %s and %s", v.Name, f, b.name)
			}
			seen[v.Name] = b.name
		}
		out = append(out, File{Name: b.name, Vectors: &vectorspb.VectorFile{Format: Format, Protocol: Protocol, Vectors: g.vs}})
	}
	return out, nil
}

// Marshal returns the canonical JSON image of f: protojson with
// UseProtoNames, re-indented with two spaces by encoding/json so that the
// bytes are stable (protojson's own whitespace is deliberately not), and a
// final newline.
func Marshal(f *vectorspb.VectorFile) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(f)
	if err != nil {
		return nil, err
	}
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// Unmarshal parses a vector file written by Marshal (or any protojson
// writer of the VectorFile message). Unknown JSON fields are refused, and
// the format and protocol strings must be Format and Protocol.
func Unmarshal(b []byte) (*vectorspb.VectorFile, error) {
	f := new(vectorspb.VectorFile)
	if err := protojson.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	if f.GetFormat() != Format {
		return nil, fmt.Errorf("vectors: format %q, want %q", f.GetFormat(), Format)
	}
	if f.GetProtocol() != Protocol {
		return nil, fmt.Errorf("vectors: protocol %q, want %q", f.GetProtocol(), Protocol)
	}
	return f, nil
}

// builder collects the vectors of one file, refusing duplicate names.
type builder struct {
	vs    []*vectorspb.Vector
	names map[string]bool
	err   error
}

func (g *builder) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

func (g *builder) add(v *vectorspb.Vector) {
	if g.names == nil {
		g.names = map[string]bool{}
	}
	if g.names[v.Name] {
		g.fail(fmt.Errorf("duplicate vector name %q", v.Name))
		return
	}
	if v.Note == "" {
		g.fail(fmt.Errorf("vector %q has no note", v.Name))
	}
	if !v.Valid && v.ErrorCode == "" {
		g.fail(fmt.Errorf("invalid vector %q names no error code", v.Name))
	}
	g.names[v.Name] = true
	g.vs = append(g.vs, v)
}
