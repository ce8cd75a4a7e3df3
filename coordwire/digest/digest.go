// Package digest computes the domain-separated SHA-256 digests of
// coordinator protocol 0.1.0, byte-exact per the specification:
//
//   - Operation: the operation digest of a COORD_COMMAND (§8), the
//     identity under which an operation is deduplicated;
//   - Snapshot: the canonical_sha256 of a whole-authority snapshot (§9);
//   - Replay: the canonical_sha256 of an event replay (§10);
//   - Effect: the effect_digest of a delegated terminal effect (§8);
//   - Evidence: the seal_sha256 of a binding's admitted source facts
//     (ADDENDUM C.7).
//
// Every preimage starts with an ASCII domain string followed by exactly one
// zero byte (ADDENDUM B.1); the exported Domain* constants hold them
// including that byte. Integers are big-endian.
//
// The snapshot and replay preimages carry the record (event) count before
// the records, so a streaming hash must know the count before the first
// record: SnapshotHasher and ReplayHasher take it up front and refuse a
// different number of records at Sum. A server knows the count when it
// takes the cut. A client learns it only from SNAPSHOT_END / REPLAY_END,
// after the last page; it stages every record before publication anyway
// (§9), so it verifies with the one-shot Snapshot or Replay over its staged
// records once END arrives.
package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
	"sync"
)

// Domain-separation strings, each the ASCII text followed by one zero byte.
const (
	DomainOperation = "phux-coordinator-operation/v1\x00"
	DomainSnapshot  = "phux-coordinator-snapshot/v1\x00"
	DomainReplay    = "phux-coordinator-replay/v1\x00"
	DomainEffect    = "phux-coordinator-effect/v1\x00"
	DomainEvidence  = "phux-coordinator-evidence/v1\x00"
)

// Size is the size of every digest in bytes.
const Size = sha256.Size

// writer feeds a SHA-256 state with big-endian integers and byte strings
// through a small scratch buffer, so that hashing allocates nothing once
// the state is taken from the pool.
type writer struct {
	h   hash.Hash
	buf [64]byte
	n   int
}

var pool = sync.Pool{New: func() any { return &writer{h: sha256.New()} }}

func newWriter(domain string) *writer {
	w := pool.Get().(*writer)
	w.h.Reset()
	w.n = 0
	w.str(domain)
	return w
}

// sum finishes the hash and returns the writer to the pool.
func (w *writer) sum() (out [32]byte) {
	w.flush()
	copy(out[:], w.h.Sum(w.buf[:0]))
	pool.Put(w)
	return out
}

// release returns the writer to the pool without a digest.
func (w *writer) release() { pool.Put(w) }

func (w *writer) flush() {
	if w.n > 0 {
		w.h.Write(w.buf[:w.n])
		w.n = 0
	}
}

func (w *writer) room(k int) {
	if w.n+k > len(w.buf) {
		w.flush()
	}
}

func (w *writer) u8(v uint8) {
	w.room(1)
	w.buf[w.n] = v
	w.n++
}

func (w *writer) u16(v uint16) {
	w.room(2)
	binary.BigEndian.PutUint16(w.buf[w.n:], v)
	w.n += 2
}

func (w *writer) u32(v uint32) {
	w.room(4)
	binary.BigEndian.PutUint32(w.buf[w.n:], v)
	w.n += 4
}

func (w *writer) u64(v uint64) {
	w.room(8)
	binary.BigEndian.PutUint64(w.buf[w.n:], v)
	w.n += 8
}

// id writes a 16-byte id (by value, so that the caller's array never
// escapes to the hash state).
func (w *writer) id(v [16]byte) {
	w.room(16)
	w.n += copy(w.buf[w.n:], v[:])
}

// bytes writes b verbatim (no length).
func (w *writer) bytes(b []byte) {
	if len(b) <= len(w.buf)-w.n {
		w.n += copy(w.buf[w.n:], b)
		return
	}
	w.flush()
	if len(b) <= len(w.buf) {
		w.n = copy(w.buf[:], b)
		return
	}
	w.h.Write(b)
}

// str writes s verbatim (no length).
func (w *writer) str(s string) {
	if len(s) <= len(w.buf)-w.n {
		w.n += copy(w.buf[w.n:], s)
		return
	}
	w.flush()
	for len(s) > 0 {
		k := copy(w.buf[:], s)
		w.n = k
		s = s[k:]
		if len(s) > 0 {
			w.flush()
		}
	}
}

// lenBytes writes u32_be(len(b)) || b.
// Every length in the protocol is bounded by a frame cap far below 4 GiB;
// a longer value is a programming error and panics rather than hashing a
// truncated length.
func (w *writer) lenBytes(b []byte) {
	if uint64(len(b)) > math.MaxUint32 {
		panic("digest: value longer than a u32 length can state")
	}
	w.u32(uint32(len(b)))
	w.bytes(b)
}
